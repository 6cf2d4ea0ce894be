import Glibc

/// Moves a finished file to another folder, on the same file system or another, so that a crash at any point
/// leaves it complete, and after `run` is called again (at the restart) in exactly one of the two places.
///
/// On one file system the file gets its new name with `linkat` (never replacing anything: a taken name is passed
/// over for `name (1).ext`), then loses its old one. A crash between the two leaves both names on one file; the next
/// run finds the new one by the file's identity and removes the old.
///
/// Across file systems it is copied to a marker (`.haul-move-ID`) in the target folder and synced, the marker is
/// given the final name too (a hard link: the same file), the folder synced, and the source removed. The marker
/// says the copy is whole once it has a second name: a run that finds a marker without one throws the partial copy
/// away and starts again; one that finds it named finishes the removal. The caller removes the marker (`finish`)
/// once it has stored where the file went.
public enum FileMove {
    public struct Request: Sendable {
        public var sourceRoot: String
        public var sourceDirectory: String
        public var name: String
        public var targetRoot: String
        public var targetDirectory: String
        /// The file the source name held when it was finished: a run after a crash finds a same-file-system move by it.
        public var identity: FileIdentity?
        /// The marker's name, one per download.
        public var marker: String
        /// The names tried in turn for the file in its new folder (`name`, `name (1).ext`, ...).
        public var candidate: @Sendable (Int) -> String
        /// A test's crash point (`HAUL_CRASH_AT`): the process kills itself with SIGKILL there.
        public var crashAt: String?

        public init(
            sourceRoot: String, sourceDirectory: String, name: String, targetRoot: String,
            targetDirectory: String, identity: FileIdentity?, marker: String,
            candidate: @escaping @Sendable (Int) -> String, crashAt: String?
        ) {
            self.sourceRoot = sourceRoot
            self.sourceDirectory = sourceDirectory
            self.name = name
            self.targetRoot = targetRoot
            self.targetDirectory = targetDirectory
            self.identity = identity
            self.marker = marker
            self.candidate = candidate
            self.crashAt = crashAt
        }
    }

    public enum Outcome: Sendable {
        /// In its new folder under `name`: the file's identity and size there.
        case moved(name: String, identity: FileIdentity, size: Int64)
        /// Neither name holds it any more (removed by hand).
        case gone
        case failed(FileError)
    }

    public static func run(_ request: Request) -> Outcome {
        do {
            return try move(request)
        } catch {
            return .failed(error)
        }
    }

    /// Removes the marker once the move is stored.
    public static func finish(_ request: Request) {
        guard
            let target = try? ConfinedDirectory(
                root: request.targetRoot, relative: request.targetDirectory,
                create: false)
        else { return }
        try? target.remove(request.marker)
        try? target.sync()
    }

    private static func move(_ r: Request) throws(FileError) -> Outcome {
        let source = try ConfinedDirectory(root: r.sourceRoot, relative: r.sourceDirectory, create: false)
        let target = try ConfinedDirectory(root: r.targetRoot, relative: r.targetDirectory, create: true)
        // The folder it is in already: nothing to move (and no name to remove).
        if let here = source.identity("."), here == target.identity(".") {
            return source.identity(r.name) == nil ? .gone : try outcome(r.name, in: source)
        }
        if let copy = target.identity(r.marker) {
            // A copy from an earlier run: whole once it has its final name, else thrown away.
            if let final = name(of: copy, in: target, r) {
                try finishRemoving(r.name, from: source, unless: copy)
                return try outcome(final, in: target)
            }
            try target.remove(r.marker)
        }
        guard let held = source.identity(r.name), r.identity == nil || held == r.identity else {
            // Moved on one file system before a crash, the old name removed already.
            if let identity = r.identity, let final = name(of: identity, in: target, r) {
                return try outcome(final, in: target)
            }
            return .gone
        }
        // One file system: a second name, then the old one goes.
        for n in 0..<10_000 {
            let candidate = r.candidate(n)
            if target.identity(candidate) == held {
                break
            }
            guard let linked = try source.linkKeeping(r.name, in: target, as: candidate) else {
                return try copyAcross(r, from: source, to: target)
            }
            if linked { break }
            if n == 9_999 { throw FileError(call: "link", path: target.shown(r.name), code: EEXIST) }
        }
        crash(r, "move-linked")
        try target.sync()
        try source.remove(r.name)
        try source.sync()
        crash(r, "move-unlinked")
        guard let final = name(of: held, in: target, r) else { return .gone }
        return try outcome(final, in: target)
    }

    private static func copyAcross(
        _ r: Request, from source: ConfinedDirectory,
        to target: ConfinedDirectory
    ) throws(FileError) -> Outcome {
        _ = try source.copy(r.name, to: target, as: r.marker, halfway: { crash(r, "move-copying") })
        crash(r, "move-copied")
        guard let copy = target.identity(r.marker) else {
            throw FileError(call: "open", path: target.shown(r.marker), code: ENOENT)
        }
        var final: String?
        for n in 0..<10_000 where final == nil {
            let candidate = r.candidate(n)
            // The marker keeps its name until the move is stored: it is how a later run knows the copy is whole.
            guard let linked = try target.linkKeeping(r.marker, in: target, as: candidate) else {
                throw FileError(call: "link", path: target.shown(candidate), code: EPERM)
            }
            if linked { final = candidate }
        }
        guard let final else { throw FileError(call: "link", path: target.shown(r.name), code: EEXIST) }
        try target.sync()
        crash(r, "move-named")
        try finishRemoving(r.name, from: source, unless: copy)
        crash(r, "move-unlinked")
        return try outcome(final, in: target)
    }

    /// Removes the source name, unless it is the copy itself (one folder), and makes that durable.
    private static func finishRemoving(
        _ name: String, from source: ConfinedDirectory,
        unless copy: FileIdentity
    ) throws(FileError) {
        guard let held = source.identity(name), held != copy else { return }
        try source.remove(name)
        try source.sync()
    }

    /// The name among the candidates that holds the file `identity`, if one does.
    private static func name(of identity: FileIdentity, in target: ConfinedDirectory, _ r: Request) -> String? {
        for n in 0..<10_000 {
            let candidate = r.candidate(n)
            guard let found = target.identity(candidate) else {
                // Names are taken in order, but one may have been freed since: look a little further.
                if n > 64 { return nil }
                continue
            }
            if found == identity { return candidate }
        }
        return nil
    }

    private static func outcome(_ name: String, in target: ConfinedDirectory) throws(FileError) -> Outcome {
        guard let identity = target.identity(name), let size = target.size(name) else { return .gone }
        return .moved(name: name, identity: identity, size: size)
    }

    private static func crash(_ r: Request, _ point: String) {
        if r.crashAt == point { kill(getpid(), SIGKILL) }
    }
}
