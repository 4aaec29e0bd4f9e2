import Foundation
import SodiumBridge
import SystemPackage
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The exclusive ownership of a device directory by one process (`semantics.md`,
/// "Processes and the agent").
///
/// An open file description of `<directory>/lock` holding a `flock(LOCK_EX)`.
/// The kernel releases it when the process ends however it ends, so a crash
/// never leaves a stale lock. The owner writes its pid into the file, so that a
/// waiter can name it. Nothing secret is in the file. A second open in the process
/// that already owns the directory fails at once (waiting would wait for itself).
package final class OwnershipLock: Sendable {
    /// The name of the lock file in the device directory.
    package static let fileName = "lock"

    let path: FilePath
    private let descriptor: Locked<FileDescriptor?>
    /// The lock file's device and inode: its entry in ``held``.
    private let identity: FileIdentity

    /// A lock file by device and inode.
    private struct FileIdentity: Hashable, Sendable {
        let device: UInt64
        let inode: UInt64
    }

    /// The lock files this process owns now.
    private static let held = Locked<Set<FileIdentity>>([])

    private init(path: FilePath, descriptor: FileDescriptor, identity: FileIdentity) {
        self.path = path
        self.descriptor = Locked(descriptor)
        self.identity = identity
    }

    deinit { release() }

    /// Takes the lock on `directory`, waiting up to `timeout` while another
    /// opener holds it.
    ///
    /// - Parameter waiting: called once, with the owner's pid (when known), if the
    ///   lock is held by someone else when first tried.
    /// - Throws: ``DataProtectionError/Code/storeBusy`` naming the owner once the
    ///   timeout has passed; ``DataProtectionError/Code/ioFailure`` if the lock
    ///   file cannot be opened.
    package static func acquire(
        in directory: FilePath, timeout: Duration, waiting: ((Int32?) -> Void)? = nil
    ) throws(DataProtectionError) -> OwnershipLock {
        let path = directory.appending(fileName)
        let descriptor: FileDescriptor
        do {
            descriptor = try FileDescriptor.open(
                path, .readWrite, options: [.create, .closeOnExec, .noFollow], permissions: [.ownerReadWrite])
        } catch {
            throw PosixFileSystem.error(for: (error as? Errno) ?? .ioError, operation: "open", path: path)
        }
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0 else {
            let failure = Errno(rawValue: errno)
            try? descriptor.close()
            throw PosixFileSystem.error(for: failure, operation: "fstat", path: path)
        }
        let identity = FileIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
        if held.withLock({ $0.contains(identity) }) {
            try? descriptor.close()
            throw DataProtectionError(
                .storeBusy, "This process already owns the device at \(directory): a Device or ProtectedStore opened on it is still alive.",
                hint: "Use the store you have, or let the first one go (release every reference to it) before opening it again.")
        }
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: max(timeout, .zero))
        var pause = Duration.milliseconds(2)
        var announced = false
        while true {
            if flock(descriptor.rawValue, LOCK_EX | LOCK_NB) == 0 { break }
            let failure = Errno(rawValue: errno)
            guard failure == .wouldBlock || failure == .interrupted else {
                try? descriptor.close()
                throw PosixFileSystem.error(for: failure, operation: "flock", path: path)
            }
            if !announced {
                announced = true
                waiting?(owner(of: descriptor))
            }
            let now = clock.now
            guard now < deadline else {
                let pid = owner(of: descriptor)
                try? descriptor.close()
                let who = pid.map { "process \($0)" } ?? "another process"
                throw DataProtectionError(
                    .storeBusy, "The store is in use by \(who) (waited \(describe(timeout)) for it).",
                    hint: "Wait for that process to finish, or stop it; a longer wait may be given (dpctl: --wait).")
            }
            let nap = min(pause, now.duration(to: deadline))
            Thread.sleep(forTimeInterval: Double(nap.components.seconds) + Double(nap.components.attoseconds) / 1e18)
            pause = min(pause * 2, .milliseconds(50))
        }
        held.withLock { _ = $0.insert(identity) }
        let lock = OwnershipLock(path: path, descriptor: descriptor, identity: identity)
        lock.recordOwner()
        return lock
    }

    /// Gives the lock up (also done when the lock is released from memory, and by
    /// the kernel when the process ends). Idempotent.
    package func release() {
        descriptor.withLock { descriptor in
            guard let open = descriptor else { return }
            descriptor = nil
            _ = Self.held.withLock { $0.remove(identity) }
            try? open.close()
        }
    }

    /// Writes `<pid>\n` over the file's content: informative only, never trusted.
    private func recordOwner() {
        descriptor.withLock { descriptor in
            guard let descriptor else { return }
            let text = Array("\(getpid())\n".utf8)
            _ = ftruncate(descriptor.rawValue, 0)
            _ = try? text.withUnsafeBytes { try descriptor.writeAll(toAbsoluteOffset: 0, $0) }
        }
    }

    /// `2.5 s`, `30 s`: a wait as people say it.
    private static func describe(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        let rounded = (seconds * 10).rounded() / 10
        return rounded == rounded.rounded() ? "\(Int(rounded)) s" : "\(rounded) s"
    }

    /// The pid the current owner wrote, if it reads as one.
    private static func owner(of descriptor: FileDescriptor) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 16)
        guard let count = try? buffer.withUnsafeMutableBytes({ try descriptor.read(fromAbsoluteOffset: 0, into: $0) }),
              count > 0 else { return nil }
        let text = String(decoding: buffer[0..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let pid = Int32(text), pid > 0 else { return nil }
        return pid
    }
}
