internal import CCurl
import Glibc

/// The settings a transfer's profile names, each applied by name (`TransferProfile.Setting` says what each is for).
extension Transfer {
    func apply(_ setting: TransferProfile.Setting) throws -> [CURLcode] {
        switch setting {
        case .http2(let waitOn):
            var results = [haul_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))]
            if let scheme = URLParts(request.url)?.scheme, waitOn.contains(scheme) {
                results.append(haul_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1))
            }
            return results
        case .httpAuthentication:
            // Applied with the credentials (`configure`): only a request that carries some authenticates.
            return []
        case .fileTime:
            return [haul_easy_setopt_long(easy, CURLOPT_FILETIME, 1)]
        case .passiveToControlAddress:
            // Passive is curl's default (no CURLOPT_FTPPORT).
            return [
                haul_easy_setopt_long(easy, CURLOPT_FTP_SKIP_PASV_IP, 1),
                haul_easy_setopt_long(easy, CURLOPT_FTP_USE_EPSV, 1),
            ]
        case .requireTLS:
            // CURLUSESSL_ALL is 3; AUTH TLS first (curl's default asks AUTH SSL first, an old name some servers
            // refuse).
            return [
                haul_easy_setopt_long(easy, CURLOPT_USE_SSL, 3),
                haul_easy_setopt_long(easy, CURLOPT_FTPSSLAUTH, Int(CURLFTPAUTH_TLS.rawValue)),
            ]
        case .sizeAndOffsetCommands:
            return try applySizeAndOffsetCommands()
        case .ssh:
            return applySSH()
        case .sweeps:
            // The multi asks `needsSweeps`.
            return []
        }
    }

    /// curl stops reading a file where the server's SIZE said it ends: told to ignore the size, it sends neither
    /// SIZE nor REST, and Haul sends both before the transfer: SIZE allowed to fail (the size is then unknown),
    /// whose reply the replies read, and REST for a range. The body runs to where the server ends it (or the
    /// range's end), and the machine fails one longer than the size (`size_mismatch`), as it does an HTTP body past
    /// its Content-Length.
    private func applySizeAndOffsetCommands() throws -> [CURLcode] {
        // The file's name as curl takes it from the URL (its last segment, decoded, after a CWD to each folder).
        guard let path = URLParts(request.url)?.decodedPath, let slash = path.lastIndex(of: "/"),
            case let name = path[path.index(after: slash)...], !name.isEmpty,
            !name.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 })
        else {
            throw TransferError.curl("the URL names no file the server could be asked for")
        }
        commandList = curl_slist_append(nil, "*SIZE \(name)")
        if let start = request.range?.start, start > 0 {
            commandList = curl_slist_append(commandList, "REST \(start)")
        }
        guard commandList != nil else { throw TransferError.outOfMemory }
        return [
            haul_easy_setopt_long(easy, CURLOPT_IGNORE_CONTENT_LENGTH, 1),
            haul_easy_setopt_slist(easy, CURLOPT_PREQUOTE, commandList),
        ]
    }

    private func applySSH() -> [CURLcode] {
        let me = Unmanaged.passUnretained(self).toOpaque()
        let policy = request.policy
        // A password (from the URL or `password`) or the operator's key.
        var results = [haul_easy_setopt_long(easy, CURLOPT_SSH_AUTH_TYPES, 1 | 2 | 8)]
        if let key = policy.sshKey {
            results.append(haul_easy_setopt_string(easy, CURLOPT_SSH_PRIVATE_KEYFILE, key))
            if access(key + ".pub", R_OK) == 0 {
                results.append(haul_easy_setopt_string(easy, CURLOPT_SSH_PUBLIC_KEYFILE, key + ".pub"))
            }
        }
        // Against the known hosts (none: every key unknown) or the download's pin, in the callback, which says which
        // of the two failed.
        results.append(haul_easy_setopt_string(easy, CURLOPT_SSH_KNOWNHOSTS, policy.sshKnownHosts ?? "/dev/null"))
        if request.hostKey != nil {
            // The key is checked when a session is made: a pinned download makes its own (a session to the host
            // checked against the known hosts is no proof of the pin) and leaves it to no other download (whose
            // host key the pin proves nothing about).
            results.append(haul_easy_setopt_long(easy, CURLOPT_FRESH_CONNECT, 1))
            results.append(haul_easy_setopt_long(easy, CURLOPT_FORBID_REUSE, 1))
        }
        results.append(haul_easy_setopt_ptr(easy, CURLOPT_SSH_KEYDATA, me))
        results.append(
            haul_easy_setopt_sshkeyfn(easy) { _, known, found, match, clientp in
                guard let clientp, let found else { return Int32(CURLKHSTAT_REJECT.rawValue) }
                let transfer = Unmanaged<Transfer>.fromOpaque(clientp).takeUnretainedValue()
                return transfer.checkHostKey(found.pointee, known: known != nil, match: match)
            })
        return results
    }

    /// The SFTP server's host key: the download's pin when it has one, else the known hosts' verdict.
    func checkHostKey(_ found: curl_khkey, known: Bool, match: curl_khmatch) -> Int32 {
        let raw: [UInt8]
        if found.len > 0, let key = found.key {
            raw = Array(UnsafeRawBufferPointer(start: key, count: found.len))
        } else {
            raw = found.key.flatMap { Base64.decode(String(cString: $0)) } ?? []
        }
        let fingerprint = SSHHostKey.fingerprint(raw)
        let accepted: Bool
        if let pin = request.hostKey {
            accepted = SSHHostKey.normalized(pin) == fingerprint
            if !accepted { hostKeyRefusal = (fingerprint, true) }
        } else {
            accepted = match == CURLKHMATCH_OK
            if !accepted { hostKeyRefusal = (fingerprint, match == CURLKHMATCH_MISMATCH) }
        }
        return Int32((accepted ? CURLKHSTAT_FINE : CURLKHSTAT_REJECT).rawValue)
    }
}
