import DataProtection
import Foundation

/// The directories `dpctl` makes around a store (`$XDG_STATE_HOME`, `…/dpctl`, the data
/// directory's parents): each one it creates is mode 0700 whatever the umask, so that no
/// other user may rename the store's directories away or plant entries beside them.
/// Directories that already exist are left as they are.
enum PrivateDirectories {
    /// Creates `directory` and every missing parent of it, each 0700.
    static func create(_ directory: URL) throws(DataProtectionError) {
        var missing: [String] = []
        var current = directory.standardizedFileURL.path
        var status = stat()
        while lstat(current, &status) != 0 {
            guard errno == ENOENT else { throw failure(current) }
            missing.append(current)
            let parent = (current as NSString).deletingLastPathComponent
            guard parent != current, !parent.isEmpty else { break }
            current = parent
        }
        for path in missing.reversed() {
            if mkdir(path, 0o700) != 0 {
                guard errno == EEXIST else { throw failure(path) }
                continue  // made meanwhile by another process: its own
            }
            guard chmod(path, 0o700) == 0 else { throw failure(path) }
        }
    }

    private static func failure(_ path: String) -> DataProtectionError {
        DataProtectionError(.ioFailure, "Cannot create \(path): \(String(cString: strerror(errno))).")
    }
}
