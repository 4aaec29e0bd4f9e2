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
enum ParentDirectories {
    /// Creates every missing directory above `path` (not `path` itself), mode 0700.
    ///
    /// - Throws: ``DataProtectionError/Code/notADirectory`` when an ancestor is a file;
    ///   ``DataProtectionError/Code/ioFailure`` (or the code of the failure) when one
    ///   cannot be made, naming it.
    static func create(above path: FilePath) throws(DataProtectionError) {
        var missing: [FilePath] = []
        var current = path.removingLastComponent()
        while !current.isEmpty, current != "/" {
            var status = stat()
            let found = current.withPlatformString { lstat($0, &status) } == 0
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
            // The umask may have taken bits away; it never gives any: 0700 is what is left or less.
            _ = directory.withPlatformString { chmod($0, 0o700) }
        }
    }

    /// Whether `path` is a symbolic link to a directory (a parent such as `/tmp` on some systems).
    private static func isDirectoryThroughLink(_ path: FilePath) -> Bool {
        var status = stat()
        return path.withPlatformString { stat($0, &status) } == 0 && status.st_mode & S_IFMT == S_IFDIR
    }
}
