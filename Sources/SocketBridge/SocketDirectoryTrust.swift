#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether a socket's directory can be trusted to hold only its user's sockets: the
/// directory belongs to the user and neither group nor others can write it, and every
/// directory above it belongs to the user or to root and is closed to writers other than
/// its owner, unless it is sticky (`/tmp`: others may add entries there, but not rename or
/// remove ours). Otherwise another user could put a socket of theirs where a client looks
/// for its agent, or move the directory away and put their own in its place.
public enum SocketDirectoryTrust {
    /// Why a socket's directory is not trusted.
    public enum Problem: Error, Sendable, Hashable {
        /// The directory (or one above it) does not exist: no socket can be there.
        case missing(directory: String)
        /// A directory on the way is not safe: which one, and why.
        case untrusted(directory: String, reason: String)
    }

    /// The socket path with its directory resolved (no symbolic link left in it), after
    /// checking that directory and every one above it for `user`.
    ///
    /// Connect through the path returned: it names the directories that were checked.
    public static func verifiedPath(ofSocket socketPath: String, user: UInt32) throws(Problem) -> String {
        guard let slash = socketPath.lastIndex(of: "/") else {
            throw .untrusted(directory: ".", reason: "the socket path \(socketPath) is relative")
        }
        let directory = slash == socketPath.startIndex ? "/" : String(socketPath[..<slash])
        let name = String(socketPath[socketPath.index(after: slash)...])
        guard let resolved = realpath(directory, nil) else {
            if errno == ENOENT || errno == ENOTDIR { throw .missing(directory: directory) }
            throw .untrusted(directory: directory, reason: "it cannot be resolved (\(String(cString: strerror(errno))))")
        }
        let canonical = String(cString: resolved)
        free(resolved)
        var status = stat()
        guard lstat(canonical, &status) == 0 else {
            throw .untrusted(directory: canonical, reason: "it cannot be examined (\(String(cString: strerror(errno))))")
        }
        guard status.st_uid == user else {
            throw .untrusted(directory: canonical, reason: "it belongs to user \(status.st_uid), not to user \(user)")
        }
        guard status.st_mode & 0o022 == 0 else {
            throw .untrusted(directory: canonical, reason: "others can write it (mode \(String(status.st_mode & 0o7777, radix: 8)))")
        }
        var above = canonical
        while above != "/" {
            above = above.lastIndex(of: "/").map { $0 == above.startIndex ? "/" : String(above[..<$0]) } ?? "/"
            guard lstat(above, &status) == 0 else {
                throw .untrusted(directory: above, reason: "it cannot be examined (\(String(cString: strerror(errno))))")
            }
            guard status.st_uid == user || status.st_uid == 0 else {
                throw .untrusted(directory: above, reason: "it belongs to user \(status.st_uid), who could move what it holds")
            }
            guard status.st_mode & 0o022 == 0 || status.st_mode & S_ISVTX != 0 else {
                throw .untrusted(directory: above, reason: "others can write it and it is not sticky (mode \(String(status.st_mode & 0o7777, radix: 8)))")
            }
        }
        return canonical == "/" ? "/" + name : canonical + "/" + name
    }
}
