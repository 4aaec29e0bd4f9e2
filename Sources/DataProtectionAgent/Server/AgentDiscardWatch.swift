import DataProtection
import Foundation
import SocketBridge
import Synchronization
import SystemPackage

/// Stops a transfer of a class's plaintext at the instant that class's key is discarded
/// (semantics.md, "Processes and the agent": data read before the lock is not delivered
/// after it). A transfer of a `complete` or `completeWhenUserInactive` file or database
/// (readFile, writeFile, sqlStream) holds one; its waits on the client, for the client to
/// read or to send, look at it every 100 ms, so a client that paused gets nothing more once
/// the key is gone, and the pieces the agent was holding for it are released (freed memory
/// is wiped in the agent, `ProcessProtection.wipeFreedMemory()`). Restart and erase stop it too.
///
/// Registered with the device for the transfer's life (the device holds it weakly).
final class AgentDiscardWatch: DeviceLifecycleObserver, Sendable {
    let protectionClass: ProtectionClass
    private let discarded = Atomic<Bool>(false)

    /// A watch for `protectionClass` on `device`; `nil` for a class whose key stays while
    /// its data is in use (`completeUnlessOpen`'s open files, and the classes a lock keeps).
    init?(device: Device, protection protectionClass: ProtectionClass?) {
        guard let protectionClass, [.complete, .completeWhenUserInactive].contains(protectionClass) else { return nil }
        self.protectionClass = protectionClass
        device.addLifecycleObserver(self, first: true)
    }

    func deviceWillDiscardKeys(of classes: Set<ProtectionClass>) {
        if classes.contains(protectionClass) { discarded.store(true, ordering: .sequentiallyConsistent) }
    }

    func deviceWillRestart(flushing: Bool) { discarded.store(true, ordering: .sequentiallyConsistent) }

    func deviceWillErase() { discarded.store(true, ordering: .sequentiallyConsistent) }

    /// Whether the key went since the transfer began.
    var isDiscarded: Bool { discarded.load(ordering: .sequentiallyConsistent) }

    /// Throws `protectedDataUnavailable` once the key went.
    func check() throws(DataProtectionError) {
        guard isDiscarded else { return }
        throw DataProtectionError(.protectedDataUnavailable,
                                  "The device locked and the \(protectionClass.rawValue) class key was discarded during the transfer: it stopped there.",
                                  hint: "Unlock the device, then start the transfer again.")
    }

    /// How long one wait on the client lasts before the watch is looked at again.
    static let interval: Int32 = 100

    /// The largest write to a pipe or socket after it was found writable: one that never blocks.
    static let slice = 4096

    /// Waits until `descriptor` has something to read (or its writer hung up), looking at the
    /// watch (when there is one) every ``interval`` ms.
    static func waitUntilReadable(_ descriptor: FileDescriptor, watch: AgentDiscardWatch?) throws(DataProtectionError) {
        guard let watch else { return }
        while true {
            try watch.check()
            do {
                if try UnixSocket.waitUntilReadable(descriptor: descriptor.rawValue, milliseconds: interval) { break }
            } catch {
                return  // the read that follows reports it
            }
        }
        try watch.check()
    }

    /// Writes every byte of `bytes` to `descriptor`. With a watch, a pipe or socket (whose
    /// reader may pause) gets them in writes that never block (at most ``slice`` bytes, each after the descriptor was found
    /// writable) and the watch is looked at before each: the transfer stops at the discard
    /// even while its client reads nothing.
    static func write(_ bytes: UnsafeRawBufferPointer, to descriptor: FileDescriptor, watch: AgentDiscardWatch?) throws {
        guard let watch else {
            _ = try descriptor.writeAll(bytes)
            return
        }
        // A pipe or socket waits for its reader; a file, a terminal or /dev/null takes the piece at once.
        let type = try? descriptor.stat().type
        let waitsForReader = type == nil || type == .fifo || type == .socket
        var offset = 0
        while offset < bytes.count {
            try watch.check()
            if waitsForReader, !(try UnixSocket.waitUntilWritable(descriptor: descriptor.rawValue, milliseconds: interval)) { continue }
            try watch.check()
            let end = waitsForReader ? min(bytes.count, offset + slice) : bytes.count
            offset += try descriptor.write(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]), retryOnInterrupt: true)
        }
    }

    /// Sends every byte of `bytes` on `socket` as ``write(_:to:watch:)`` writes them (without
    /// a watch: at once).
    static func send(_ bytes: UnsafeRawBufferPointer, on socket: UnixSocket, watch: AgentDiscardWatch?) throws {
        guard let watch else {
            try socket.send(bytes)
            return
        }
        var offset = 0
        while offset < bytes.count {
            try watch.check()
            if !(try UnixSocket.waitUntilWritable(descriptor: socket.descriptor, milliseconds: interval)) { continue }
            try watch.check()
            let end = min(bytes.count, offset + slice)
            try socket.send(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
            offset = end
        }
    }
}
