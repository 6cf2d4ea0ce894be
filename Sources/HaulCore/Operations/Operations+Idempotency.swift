import FoundationEssentials
import HaulLoop

/// Idempotency-Key: a request repeated with the same key gets the first one's answer, and nothing of it is applied
/// again; the same key with another request is a conflict. The keys are stored with what they answered.
extension Operations {
    /// Adds `request` once per key (already the caller's own): a repeat with the same request gets the first
    /// answer's status and the download as it is now.
    func add(
        _ request: NewDownload, once idempotency: Idempotency
    )
        throws(EngineError) -> (snapshot: DownloadSnapshot, created: Bool)
    {
        let store = engine.store
        if let first = try EngineError.storing({ try store.idempotencyAnswer(key: idempotency.key) }) {
            guard first.requestHash == idempotency.requestHash else {
                throw .conflict("Idempotency-Key '\(idempotency.key)' was used before with a different request")
            }
            guard let snapshot = engine.snapshot(first.downloadID) else {
                throw .conflict("the download created for Idempotency-Key '\(idempotency.key)' has been removed")
            }
            return (snapshot, first.status == 201)
        }
        let answer = try engine.add(request)
        do {
            try store.rememberIdempotencyAnswer(
                key: idempotency.key, downloadID: answer.snapshot.download.id,
                requestHash: idempotency.requestHash,
                status: answer.created ? 201 : 200)
        } catch {
            engine.log.error("cannot record an Idempotency-Key", ["error": "\(error)"])
        }
        return answer
    }

    /// What the first batch with this key was answered, or nil for a new key; the same key with another body, or
    /// one a single download used, is a conflict.
    public func batchAnswer(_ idempotency: Idempotency) throws(EngineError) -> String? {
        let key = key(idempotency)
        guard let first = try EngineError.storing({ try engine.store.batchAnswer(key: key) }) else { return nil }
        guard first.requestHash == idempotency.requestHash, let answer = first.answer else {
            throw .conflict("Idempotency-Key '\(idempotency.key)' was used before with a different request")
        }
        return answer
    }

    public func rememberBatchAnswer(_ idempotency: Idempotency, answer: String) throws(EngineError) {
        let key = key(idempotency)
        try EngineError.storing {
            try engine.store.rememberBatchAnswer(key: key, requestHash: idempotency.requestHash, answer: answer)
        }
    }
}
