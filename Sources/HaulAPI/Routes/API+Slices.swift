import HaulCore
import HaulLoop

/// Bulk changes (removing every finished download, pausing ten thousand) a slice per loop turn: a slice is a few
/// milliseconds of work, and the loop answers other requests (`/healthz`, a poll) between two slices. The answer
/// goes out when the last slice is done.
extension API {
    /// Downloads one loop turn of a bulk change handles.
    static let bulkSlice = 200

    /// Works through `items` `bulkSlice` at a time and answers with `finish()` when all are done (at once when they
    /// fit one slice). A slice that throws ends the work, and its problem is the answer.
    func inSlices<T>(
        _ items: [T], _ slice: @escaping (ArraySlice<T>) throws(Problem) -> Void,
        finish: @escaping () -> HTTPResponse
    ) -> APIResult {
        let run = SliceRun(items: items, slice: slice, finish: finish, operations: serverOperations)
        run.step()
        if let response = run.pending.response { return .response(response) }
        return .pending(run.pending)
    }
}

/// One bulk change in progress; it keeps itself alive through the engine's next-turn queue.
private final class SliceRun<T> {
    let items: [T]
    let slice: (ArraySlice<T>) throws(Problem) -> Void
    let finish: () -> HTTPResponse
    let operations: Operations
    let pending = PendingResponse()
    var next = 0

    init(
        items: [T], slice: @escaping (ArraySlice<T>) throws(Problem) -> Void, finish: @escaping () -> HTTPResponse,
        operations: Operations
    ) {
        self.items = items
        self.slice = slice
        self.finish = finish
        self.operations = operations
    }

    func step() {
        let end = min(next + API.bulkSlice, items.count)
        do {
            try slice(items[next..<end])
        } catch {
            return pending.resolve(error.response(instance: "/downloads"))
        }
        next = end
        guard next < items.count else { return pending.resolve(finish()) }
        operations.onNextTurn { [self] in step() }
    }
}
