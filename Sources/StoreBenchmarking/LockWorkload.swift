import DataProtection
import Foundation
import SodiumBridge

/// Unlock and lock latency of a device, and lock with many open `complete` handles.
package enum LockWorkload {
    /// Locks, then times `unlock(passcode:)`; then times Argon2id alone with the device's own parameters.
    package static func unlock(_ device: Device, passcode: String) throws -> (unlock: Duration, argon2id: Duration) {
        try device.lock()
        let total = try measure { try device.unlock(passcode: passcode) }
        guard case .argon2id(let salt, let operations, let memory) = device.passcodeParameters else {
            return (total, .zero)
        }
        let secret = SecureBytes(copyingUTF8: passcode)
        let argon2id = try measure { _ = try Argon2id.deriveKey(passcode: secret, salt: salt, operations: operations, memory: memory) }
        return (total, argon2id)
    }

    /// Opens `count` `complete` files in `directory` (each written `dirty` with 4 KiB not yet
    /// synchronized, or left untouched), then times `lock()` (grace 0: every class A key and
    /// file key is wiped when it returns). Checks that every handle then refuses to write and that
    /// every acknowledged write survived; unlocks and closes them.
    package static func lock(_ store: ProtectedStore, passcode: String?, directory: String, count: Int, dirty: Bool) throws -> Duration {
        let payload = Data(repeating: 0xA5, count: 4096)
        var handles: [ProtectedFileHandle] = []
        for index in 0..<count {
            let handle = try store.openFile(atPath: "\(directory)/h-\(index)", create: true, protection: .complete)
            if dirty { try handle.write(contentsOf: payload) }
            handles.append(handle)
        }
        let elapsed = try measure { try store.device.lock() }
        for handle in handles {
            do {
                try handle.write(contentsOf: payload, atOffset: 0)
                throw DataProtectionError(.invalidArgument, "a complete handle still wrote after the lock")
            } catch let error as DataProtectionError where error.code == .protectedDataUnavailable {
                continue
            }
        }
        try store.device.unlock(passcode: passcode)
        for (index, handle) in handles.enumerated() {
            try handle.close()
            let size = try store.attributesOfItem(atPath: "\(directory)/h-\(index)").size
            guard size == (dirty ? UInt64(payload.count) : 0) else {
                throw DataProtectionError(.integrityFailure, "an acknowledged write was lost by the lock")
            }
        }
        return elapsed
    }
}
