import HaulLoop

/// A finished HLS download remuxed into another container by the operator's program (the config file's
/// `hls-remux`, run as hooks are: an argument list, no shell, killed after `--hook-timeout`), between its name and
/// its completion: moves and hooks see the new file. A remux that fails leaves the joined file as it was; a crash
/// during one leaves it too (the restart finds the download finished under its first name).
extension DownloadRunner {
    func remux(_ argv: [String], name: String, stamp: FileStamp, in directory: ConfinedDirectory, of download: Download)
    {
        guard let ext = HookConfig.remuxExtension(argv), let pool = host.remuxCommands else {
            return queue.append(.published(name: name, file: stamp))
        }
        let folder = host.config.downloadRoot + (download.directory.isEmpty ? "" : "/" + download.directory)
        let temporary = ".\(name).remux.\(ext)"
        try? directory.remove(temporary)
        let command = argv.map { item in
            item == "{input}"
                ? folder + "/" + name
                : item.hasPrefix("{output.") && item.hasSuffix("}") ? folder + "/" + temporary : item
        }
        let meta = ["download.id": id, "file.name": name, "remux.program": argv[0]]
        pool.run(command, environment: ["PATH=/usr/local/bin:/usr/bin:/bin"], input: [], on: host.loop) { result in
            guard !self.done else {
                try? directory.remove(temporary)
                return
            }
            var published = (name: name, stamp: stamp)
            // Only what the program wrote as a file of its own is named: never a link planted in its place.
            if result.status == 0, directory.foreignReason(temporary) == nil, let size = directory.size(temporary),
                size > 0,
                let renamed = self.named(temporary, as: Self.stem(name) + "." + ext, in: directory)
            {
                published = (renamed, directory.identity(renamed).map { FileStamp($0, size: size) } ?? stamp)
                try? directory.remove(name)
                try? directory.sync()
                self.host.log.info("remuxed", meta.merging(["file.renamed": renamed]) { a, _ in a })
            } else {
                try? directory.remove(temporary)
                var why = meta
                why["remux.status"] = result.status.map(String.init) ?? "none"
                if let error = result.error { why["remux.error"] = error }
                if !result.output.isEmpty { why["remux.output"] = result.output }
                self.host.log.warning("the remux failed; the joined file is kept", why)
            }
            self.deliver(.published(name: published.name, file: published.stamp))
        }
    }

    /// `temporary` under the first free name derived from `base`; nil when none could be given.
    private func named(_ temporary: String, as base: String, in directory: ConfinedDirectory) -> String? {
        for n in 0..<10_000 {
            let candidate = FileName.candidate(base, n)
            guard let linked = try? directory.link(temporary, to: candidate) else { return nil }
            if linked { return candidate }
        }
        return nil
    }

    /// `name` without its extension.
    static func stem(_ name: String) -> String {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return name }
        return String(name[..<dot])
    }
}
