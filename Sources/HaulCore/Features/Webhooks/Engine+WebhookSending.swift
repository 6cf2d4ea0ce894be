import FoundationEssentials
import HaulLoop

/// Webhook deliveries sent: taken when due, attempted a few per webhook at once, their outcomes stored in batches,
/// and the outbox pruned.
extension Engine {
    // MARK: sending

    /// A sending pass on the next loop turn (asked once however often).
    func askSend() {
        guard !outbox.stopping, !outbox.sendAsked else { return }
        outbox.sendAsked = true
        later { [unowned self] in
            self.outbox.sendAsked = false
            self.sendDueDeliveries()
        }
    }

    /// Starts attempts of due deliveries into each webhook's free slots, but for webhooks at rest.
    func sendDueDeliveries() {
        guard !outbox.stopping, !outbox.hooks.isEmpty else { return }
        let now = clock.now
        var limits: [(webhookID: String, limit: Int)] = []
        var room = Engine.attemptsPerTurn
        // Round robin from where the last pass stopped: each webhook gets its turn however many there are.
        let count = outbox.hooks.count
        var visited = 0
        while visited < count, room > 0 {
            let hook = outbox.hooks[(outbox.sendFrom + visited) % count]
            visited += 1
            let slots = outbox.slots[hook.id] ?? WebhookSlots()
            guard slots.restUntil <= now else { continue }
            let free = min(room, (slots.failures > 0 ? 1 : Engine.webhookSlots) - slots.inFlight)
            if free > 0 {
                limits.append((hook.id, free))
                room -= free
            }
        }
        outbox.sendFrom = (outbox.sendFrom + visited) % max(1, count)
        guard !limits.isEmpty else { return }
        let due: [WebhookDelivery]
        do {
            due = try store.takeDueDeliveries(node: config.node, now: clock.wallTime, hold: Engine.webhookTimeout + 15,
                                              limits: limits)
        } catch {
            return log.warning("cannot read the webhook outbox", ["error": "\(error)"])
        }
        // Bodies of recent changes stay at hand; a few thousand at most.
        if outbox.resources.count > 2048 { outbox.resources.removeAll(keepingCapacity: true) }
        let missing = due.compactMap(\.changeID).filter { outbox.resources[$0] == nil }
        var readable = true
        if !missing.isEmpty {
            do {
                outbox.resources.merge(try store.changeResources(missing)) { $1 }
            } catch {
                // Not sent now: their holds run out and they are taken again.
                readable = false
                log.warning("cannot read the webhook changes", ["error": "\(error)"])
            }
        }
        for delivery in due where readable || delivery.changeID.map({ outbox.resources[$0] != nil }) ?? true {
            attempt(delivery)
        }
        // This turn's share was used up: other webhooks' slots may wait to be filled, on the next turn.
        if room == 0, due.count == Engine.attemptsPerTurn { askSend() }
        pruneIfDue()
    }

    private func attempt(_ delivery: WebhookDelivery) {
        guard let hook = outbox.hooks.first(where: { $0.id == delivery.webhookID }) else {
            // Its webhook was removed (here or through another node): nothing is left to send it to.
            return giveUp(delivery, "the webhook was removed")
        }
        let resource = delivery.changeID.flatMap { outbox.resources[$0] }
        if delivery.changeID != nil, resource == nil {
            return giveUp(delivery, "the change it tells of is no longer stored")
        }
        outbox.counter += 1
        let id = TransferID(-outbox.counter)
        let body = delivery.payload(resource: resource)
        let timestamp = Int64(clock.wallTime.timeIntervalSince1970)
        let request = Outbound.post(hook.url, body: body, headers: [
            ("Content-Type", "application/json"),
            ("Haul-Event", delivery.event.rawValue),
            ("Haul-Delivery", delivery.id),
            ("Haul-Webhook", hook.id),
            ("Haul-Signature", Webhook.signature(secret: hook.secret, timestamp: timestamp, body: body)),
        ], policy: Outbound.webhookPolicy(config, timeout: Engine.webhookTimeout))
        let handler = WebhookAttempt(engine: self, delivery: delivery)
        do {
            try fetcher.start(id, request, delegate: handler)
        } catch {
            // A URL curl refuses stays refused: no retry.
            return giveUp(delivery, "\(error)")
        }
        outbox.inFlight[id] = handler
        outbox.slots[hook.id, default: WebhookSlots()].inFlight += 1
    }

    private func giveUp(_ delivery: WebhookDelivery, _ reason: String) {
        var ended = delivery
        ended.state = .failed
        ended.lastError = reason
        ended.lastAttemptAt = clock.wallTime
        record(ended)
    }

    /// Stores how an attempt went: delivered on a 2xx; else tried again after a backoff, until a day has passed.
    /// A failure also rests the webhook: its next attempt, of any delivery, waits (doubling, up to five minutes),
    /// and it has one slot until an attempt succeeds.
    func attemptEnded(_ id: TransferID, _ result: TransferResult) {
        guard let handler = outbox.inFlight.removeValue(forKey: id) else { return }
        var generator = SystemRandomNumberGenerator()
        let outcome = WebhookAttemptOutcome.after(
            handler.delivery, slots: outbox.slots[handler.delivery.webhookID] ?? WebhookSlots(),
            status: handler.status, failure: result.failure, message: result.message, now: clock.wallTime,
            uptime: clock.now, baseWait: config.webhookRetryWait, maxRest: Engine.webhookMaxRest,
            random: Double.random(in: 0..<1, using: &generator))
        let (delivery, slots) = (outcome.delivery, outcome.slots)
        if outcome.gaveUp {
            log.warning("webhook delivery given up after a day", ["webhook.id": delivery.webhookID,
                                                                  "delivery.id": delivery.id])
        }
        if outbox.hooks.contains(where: { $0.id == delivery.webhookID }) { outbox.slots[delivery.webhookID] = slots }
        record(delivery)
        askSend()
    }

    /// An outcome to store with the others of this moment (10 ms).
    private func record(_ delivery: WebhookDelivery) {
        outbox.outcomes.append(delivery)
        if delivery.state != .pending { outbox.endedSincePrune += 1 }
        if outbox.outcomeFlush == nil { armOutcomeFlush() }
    }

    private func armOutcomeFlush() {
        outbox.outcomeFlush = clock.after(Persister.groupCommitDelay) { [unowned self] in
            self.outbox.outcomeFlush = nil
            self.flushOutcomes(limit: Engine.pruneSlice)
        }
    }

    /// Stores up to `limit` of the outcomes waiting (the oldest), the rest on a later turn.
    func flushOutcomes(limit: Int = .max) {
        guard !outbox.outcomes.isEmpty else { return }
        let outcomes = Array(outbox.outcomes.prefix(limit))
        outbox.outcomes.removeFirst(outcomes.count)
        if !outbox.outcomes.isEmpty, outbox.outcomeFlush == nil { armOutcomeFlush() }
        do {
            try store.recordAttempts(outcomes)
            outbox.counts = nil
        } catch {
            // Their holds run out and they are sent again: at least once.
            log.warning("cannot store webhook outcomes", ["deliveries": "\(outcomes.count)", "error": "\(error)"])
        }
    }

    /// Records of delivered ones beyond each webhook's newest hundred, changes no delivery needs any more, and
    /// deliveries given up on over a week ago leave the store: looked at every ten seconds once a thousand
    /// deliveries have ended, and every hour anyway, a slice per loop turn.
    private func pruneIfDue() {
        let since = clock.now - outbox.prunedAt
        guard outbox.pruning == nil, since >= 3600 || (since >= 10 && outbox.endedSincePrune >= 1000) else { return }
        flushOutcomes()
        outbox.prunedAt = clock.now
        outbox.endedSincePrune = 0
        outbox.pruning = outbox.hooks.map(\.id)
        inBackground { [unowned self] in self.pruneSlice() }
    }

    private func pruneSlice() {
        guard !outbox.stopping, var waiting = outbox.pruning else { return }
        let cutoff = clock.wallTime.addingTimeInterval(-7 * 24 * 3600)
        var room = Engine.pruneSlice
        do {
            try store.transaction {
                while room > 0, let id = waiting.first {
                    room -= try store.pruneDelivered(webhookID: id, keep: Engine.deliveredKept, limit: room)
                    if room > 0 { waiting.removeFirst() }
                }
                if room > 0 { room -= try store.pruneDeliveries(before: cutoff, limit: room) }
                if room > 0 { room -= try store.pruneChanges(limit: room) }
            }
            outbox.counts = nil
        } catch {
            room = 1
            waiting = []
            log.warning("cannot prune the webhook outbox", ["error": "\(error)"])
        }
        // A slice used up: there may be more.
        if room == 0 {
            outbox.pruning = waiting
            inBackground { [unowned self] in self.pruneSlice() }
        } else {
            outbox.pruning = nil
        }
    }
}
