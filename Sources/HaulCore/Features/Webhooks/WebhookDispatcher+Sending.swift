import FoundationEssentials
import HaulLoop

/// Webhook deliveries sent: taken when due, attempted a few per webhook at once, their outcomes stored in batches,
/// and the outbox pruned.
extension WebhookDispatcher {
    // MARK: sending

    /// A sending pass on the next loop turn (asked once however often).
    func askSend() {
        guard !stopping, !sendAsked else { return }
        sendAsked = true
        host.turns.later { [unowned self] in
            self.sendAsked = false
            self.sendDueDeliveries()
        }
    }

    /// Starts attempts of due deliveries into each webhook's free slots, but for webhooks at rest.
    func sendDueDeliveries() {
        guard !stopping, !hooks.isEmpty else { return }
        let now = clock.now
        var limits: [(webhookID: String, limit: Int)] = []
        var room = WebhookDispatcher.attemptsPerTurn
        // Round robin from where the last pass stopped: each webhook gets its turn however many there are.
        let count = hooks.count
        var visited = 0
        while visited < count, room > 0 {
            let hook = hooks[(sendFrom + visited) % count]
            visited += 1
            let shares = slots[hook.id] ?? WebhookSlots()
            guard shares.restUntil <= now else { continue }
            let free = min(room, (shares.failures > 0 ? 1 : WebhookDispatcher.slotsPerWebhook) - shares.inFlight)
            if free > 0 {
                limits.append((hook.id, free))
                room -= free
            }
        }
        sendFrom = (sendFrom + visited) % max(1, count)
        guard !limits.isEmpty else { return }
        let due: [WebhookDelivery]
        do {
            due = try store.takeDueDeliveries(
                node: host.config.node, now: clock.wallTime, hold: WebhookDispatcher.timeout + 15,
                limits: limits)
        } catch {
            return log.warning("cannot read the webhook outbox", ["error": "\(error)"])
        }
        // Bodies of recent changes stay at hand; a few thousand at most.
        if resources.count > 2048 { resources.removeAll(keepingCapacity: true) }
        let missing = due.compactMap(\.changeID).filter { resources[$0] == nil }
        var readable = true
        if !missing.isEmpty {
            do {
                resources.merge(try store.changeResources(missing)) { $1 }
            } catch {
                // Not sent now: their holds run out and they are taken again.
                readable = false
                log.warning("cannot read the webhook changes", ["error": "\(error)"])
            }
        }
        for delivery in due where readable || delivery.changeID.map({ resources[$0] != nil }) ?? true {
            attempt(delivery)
        }
        // This turn's share was used up: other webhooks' slots may wait to be filled, on the next turn.
        if room == 0, due.count == WebhookDispatcher.attemptsPerTurn { askSend() }
        pruneIfDue()
    }

    private func attempt(_ delivery: WebhookDelivery) {
        guard let hook = hooks.first(where: { $0.id == delivery.webhookID }) else {
            // Its webhook was removed (here or through another node): nothing is left to send it to.
            return giveUp(delivery, "the webhook was removed")
        }
        let resource = delivery.changeID.flatMap { resources[$0] }
        if delivery.changeID != nil, resource == nil {
            return giveUp(delivery, "the change it tells of is no longer stored")
        }
        counter += 1
        let id = TransferID(-counter)
        let body = delivery.payload(resource: resource)
        let timestamp = Int64(clock.wallTime.timeIntervalSince1970)
        let request = Outbound.post(
            hook.url, body: body,
            headers: [
                ("Content-Type", "application/json"),
                ("Haul-Event", delivery.event.rawValue),
                ("Haul-Delivery", delivery.id),
                ("Haul-Webhook", hook.id),
                ("Haul-Signature", Webhook.signature(secret: hook.secret, timestamp: timestamp, body: body)),
            ], policy: Outbound.webhookPolicy(host.config, timeout: WebhookDispatcher.timeout))
        let handler = WebhookAttempt(dispatcher: self, delivery: delivery)
        do {
            try host.fetcher.start(id, request, delegate: handler)
        } catch {
            // A URL curl refuses stays refused: no retry.
            return giveUp(delivery, "\(error)")
        }
        inFlight[id] = handler
        slots[hook.id, default: WebhookSlots()].inFlight += 1
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
        guard let handler = inFlight.removeValue(forKey: id) else { return }
        var generator = SystemRandomNumberGenerator()
        let outcome = WebhookAttemptOutcome.after(
            handler.delivery, slots: slots[handler.delivery.webhookID] ?? WebhookSlots(),
            status: handler.status, failure: result.failure, message: result.message, now: clock.wallTime,
            uptime: clock.now, baseWait: host.config.webhookRetryWait, maxRest: WebhookDispatcher.maxRest,
            random: Double.random(in: 0..<1, using: &generator))
        let delivery = outcome.delivery
        if outcome.gaveUp {
            log.warning(
                "webhook delivery given up after a day",
                [
                    "webhook.id": delivery.webhookID,
                    "delivery.id": delivery.id,
                ])
        }
        if hooks.contains(where: { $0.id == delivery.webhookID }) { slots[delivery.webhookID] = outcome.slots }
        record(delivery)
        askSend()
    }

    /// An outcome to store with the others of this moment (10 ms).
    private func record(_ delivery: WebhookDelivery) {
        outcomes.append(delivery)
        if delivery.state != .pending { endedSincePrune += 1 }
        if outcomeFlush == nil { armOutcomeFlush() }
    }

    private func armOutcomeFlush() {
        outcomeFlush = clock.after(Persister.groupCommitDelay) { [unowned self] in
            self.outcomeFlush = nil
            self.flushOutcomes(limit: WebhookDispatcher.pruneSlice)
        }
    }

    /// Stores up to `limit` of the outcomes waiting (the oldest), the rest on a later turn.
    func flushOutcomes(limit: Int = .max) {
        guard !outcomes.isEmpty else { return }
        let batch = Array(outcomes.prefix(limit))
        outcomes.removeFirst(batch.count)
        if !outcomes.isEmpty, outcomeFlush == nil { armOutcomeFlush() }
        do {
            try store.recordAttempts(batch)
            counts = nil
        } catch {
            // Their holds run out and they are sent again: at least once.
            log.warning("cannot store webhook outcomes", ["deliveries": "\(batch.count)", "error": "\(error)"])
        }
    }

    /// Records of delivered ones beyond each webhook's newest hundred, changes no delivery needs any more, and
    /// deliveries given up on over a week ago leave the store: looked at every ten seconds once a thousand
    /// deliveries have ended, and every hour anyway, a slice per loop turn.
    private func pruneIfDue() {
        let since = clock.now - prunedAt
        guard pruning == nil, since >= 3600 || (since >= 10 && endedSincePrune >= 1000) else { return }
        flushOutcomes()
        prunedAt = clock.now
        endedSincePrune = 0
        pruning = hooks.map(\.id)
        inBackground { [unowned self] in self.pruneSlice() }
    }

    private func pruneSlice() {
        guard !stopping, var waiting = pruning else { return }
        let cutoff = clock.wallTime.addingTimeInterval(-7 * 24 * 3600)
        var room = WebhookDispatcher.pruneSlice
        do {
            try store.transaction {
                while room > 0, let id = waiting.first {
                    room -= try store.pruneDelivered(webhookID: id, keep: WebhookDispatcher.deliveredKept, limit: room)
                    if room > 0 { waiting.removeFirst() }
                }
                if room > 0 { room -= try store.pruneDeliveries(before: cutoff, limit: room) }
                if room > 0 { room -= try store.pruneChanges(limit: room) }
            }
            counts = nil
        } catch {
            room = 1
            waiting = []
            log.warning("cannot prune the webhook outbox", ["error": "\(error)"])
        }
        // A slice used up: there may be more.
        if room == 0 {
            pruning = waiting
            inBackground { [unowned self] in self.pruneSlice() }
        } else {
            pruning = nil
        }
    }
}
