import Foundation
import SystemPackage
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The folders above a store or device directory that do not exist yet: made as `mkdir -p`
/// would, but each closed to everyone else (0700, whatever the umask), since they hold a
/// store's files and secrets.
package enum ParentDirectories {
    /// Creates every missing directory above `path` (not `path` itself), mode 0700.
    ///
    /// - Throws: ``DataProtectionError/Code/notADirectory`` when an ancestor is a file;
    ///   ``DataProtectionError/Code/ioFailure`` (or the code of the failure) when one
    ///   cannot be made, naming it.
    package static func create(above path: FilePath) throws(DataProtectionError) {
        var missing: [FilePath] = []
        var current = path.removingLastComponent()
        while !current.isEmpty, current != "/" {
            var status = stat()
            let found = current.withPlatformString { lstat($0, &status) } == 0
            if !found && errno != ENOENT {
                throw PosixFileSystem.error(for: Errno(rawValue: errno), operation: "lstat", path: current)
            }
            if found {
                guard status.st_mode & S_IFMT == S_IFDIR || isDirectoryThroughLink(current) else {
                    throw DataProtectionError(.notADirectory, "\(current) is not a directory, so \(path) cannot be made inside it.")
                }
                break
            }
            missing.append(current)
            let parent = current.removingLastComponent()
            if parent == current { break }
            current = parent
        }
        for directory in missing.reversed() {
            let status = directory.withPlatformString { mkdir($0, 0o700) }
            if status != 0 && errno != EEXIST {
                throw PosixFileSystem.error(for: Errno(rawValue: errno), operation: "mkdir", path: directory)
            }
            if status != 0 { continue }  // made meanwhile by another process: its own
            // The umask may have taken bits away: 0700 whatever it is.
            guard directory.withPlatformString({ chmod($0, 0o700) }) == 0 else {
                throw PosixFileSystem.error(for: Errno(rawValue: errno), operation: "chmod", path: directory)
            }
        }
    }

    /// Whether `path` is a symbolic link to a directory (a parent such as `/tmp` on some systems).
    private static func isDirectoryThroughLink(_ path: FilePath) -> Bool {
        var status = stat()
        return path.withPlatformString { stat($0, &status) } == 0 && status.st_mode & S_IFMT == S_IFDIR
    }
}
