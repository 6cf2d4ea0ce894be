import FoundationEssentials

/// Pages of downloads in an order, by id (the engine makes the snapshots).
extension DownloadRegistry {
    /// The ids of up to `limit` downloads that pass `filter` from position `offset` of `order` (ties in creation
    /// order), and whether more follow. Sorts all that pass: a page of a sort other than creation order costs
    /// every match.
    func page(
        by order: DownloadOrder, descending: Bool, offset: Int, limit: Int,
        where filter: DownloadFilter = DownloadFilter()
    ) -> (ids: [String], more: Bool) {
        if order == .queue { return queuePage(descending: descending, offset: offset, limit: limit, where: filter) }
        var rows: [(id: String, sequence: Int64, number: Double, text: String)] = []
        for (id, box) in machines where box.matches(filter) {
            if order == .name {
                let d = box.download
                rows.append((id, d.sequence, 0, d.displayName.lowercased()))
                continue
            }
            // Read from the packed bytes: a sort of a million unpacks none of them.
            let d = box.sortFields
            switch order {
            case .created: rows.append((id, d.sequence, 0, ""))
            case .size: rows.append((id, d.sequence, d.totalBytes.map(Double.init) ?? -1, ""))
            case .progress:
                let fraction =
                    d.totalBytes.map {
                        $0 == 0
                            ? (d.state == .completed ? 1 : 0)
                            : Double(d.receivedBytes) / Double($0)
                    } ?? -1
                rows.append((id, d.sequence, fraction, ""))
            case .speed: rows.append((id, d.sequence, d.speed, ""))
            case .name, .queue: break
            }
        }
        rows.sort { a, b in
            if a.text != b.text { return descending ? a.text > b.text : a.text < b.text }
            if a.number != b.number { return descending ? a.number > b.number : a.number < b.number }
            return descending ? a.sequence > b.sequence : a.sequence < b.sequence
        }
        let start = min(offset, rows.count)
        let slice = rows[start...].prefix(limit)
        return (slice.map(\.id), rows.count > start + limit)
    }

    /// `page` in the order downloads start in: running ones (oldest first), then the waiting ones in the queue's
    /// order (priority, place, age), then the finished ones (oldest first).
    private func queuePage(
        descending: Bool, offset: Int, limit: Int, where filter: DownloadFilter
    )
        -> (ids: [String], more: Bool)
    {
        var rows: [(group: Int, priority: Int, order: Int64, sequence: Int64, id: String)] = []
        for (id, box) in machines where box.matches(filter) {
            let d = box.sortFields
            if d.state == .queued || d.state == .paused {
                rows.append((1, -d.priority, d.queueOrder, d.sequence, id))
            } else {
                rows.append((d.state.isFinished ? 2 : 0, 0, 0, d.sequence, id))
            }
        }
        rows.sort { a, b in
            let (x, y) = descending ? (b, a) : (a, b)
            return (x.group, x.priority, x.order, x.sequence) < (y.group, y.priority, y.order, y.sequence)
        }
        let start = min(offset, rows.count)
        return (rows[start...].prefix(limit).map(\.id), rows.count > start + limit)
    }

    /// As `page`, over the downloads of `ids` only (a `changed_since` answer): costs those, not every download.
    func page(
        of ids: Set<String>, after: Int64, limit: Int, where filter: DownloadFilter = DownloadFilter()
    )
        -> (ids: [String], more: Bool)
    {
        var chosen: [(sequence: Int64, id: String)] = []
        for id in ids {
            guard let box = machines[id], box.matches(filter) else { continue }
            let sequence = box.sortFields.sequence
            if sequence > after { chosen.append((sequence, id)) }
        }
        chosen.sort { $0.sequence < $1.sequence }
        return (chosen.prefix(limit).map(\.id), chosen.count > limit)
    }

    /// Up to `limit` downloads created after sequence number `after` that pass `filter`, in creation order, and
    /// whether more follow. Costs the downloads it looks at, not all of them.
    func page(
        after: Int64, limit: Int, where filter: DownloadFilter = DownloadFilter()
    )
        -> (ids: [String], more: Bool)
    {
        if let needle = filter.search, let blocks = search.blocks(for: needle) {
            return page(after: after, limit: limit, where: filter, in: blocks)
        }
        var items: [String] = []
        for entry in order[firstIndex(after: after)...] where !entry.box.isRemoved && entry.box.matches(filter) {
            if items.count == limit { return (items, true) }
            items.append(entry.box.id)
        }
        return (items, false)
    }

    /// As `page(after:limit:where:)`, reading only the downloads in `blocks` of creation order (ascending, as
    /// `SearchIndex` answers a search): what a search costs is the blocks its trigrams are in, not the list.
    private func page(
        after: Int64, limit: Int, where filter: DownloadFilter, in blocks: [UInt32]
    )
        -> (ids: [String], more: Bool)
    {
        var items: [String] = []
        let first = SearchIndex.block(of: max(after, 0) + 1)
        for block in blocks[SearchIndex.lowerBound(blocks, UInt32(clamping: first))...] {
            let start = Int64(block) << SearchIndex.blockShift
            let end = start + (1 << SearchIndex.blockShift)
            var position = firstIndex(after: max(after, start - 1))
            while position < order.count, order[position].sequence < end {
                let box = order[position].box
                position += 1
                guard !box.isRemoved, box.matches(filter) else { continue }
                if items.count == limit { return (items, true) }
                items.append(box.id)
            }
        }
        return (items, false)
    }

    /// Indexes up to `count` more downloads for search, in creation order from where the build stands (new ones
    /// come after it, and are indexed as they are added once it is past them); true once every download is.
    func indexForSearch(count: Int) -> Bool {
        guard let through = search.indexedThrough else { return true }
        var position = firstIndex(after: through)
        let end = min(order.count, position + count)
        var last = through
        while position < end {
            let entry = order[position]
            if !entry.box.isRemoved { entry.box.addSearchTexts(to: &search) }
            last = entry.sequence
            position += 1
        }
        search.indexed(through: position == order.count ? nil : last)
        return position == order.count
    }

    /// The ids of the downloads that pass `filter`, in creation order, without building a snapshot of any.
    func ids(where filter: DownloadFilter) -> [String] {
        order.compactMap { entry in
            !entry.box.isRemoved && entry.box.matches(filter) ? entry.box.id : nil
        }
    }
}
