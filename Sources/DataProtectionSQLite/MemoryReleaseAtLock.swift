import DataProtection
import Foundation
import SodiumBridge

/// Frees a database's decrypted pages from SQLite's memory shortly after every lock of a
/// device: `release` runs on a background thread (a statement may hold the connection
/// meanwhile, and the lock must not wait for it). `release` holds its database weakly and
/// returns false once the database is gone, which ends the observation; so does ``cancel()``.
/// The device's handler keeps the observation alive: a caller may drop this object.
/// For ``ProtectedDatabase`` and the GRDB queues and pools of DataProtectionGRDB.
package final class MemoryReleaseAtLock: Sendable {
    private let token = Locked<DeviceObservation?>(nil)

    package init(device: Device, release: @escaping @Sendable () -> Bool) {
        let token = self.token
        let observation = device.addObserver { notification in
            guard notification == .protectedDataWillBecomeUnavailable else { return }
            DispatchQueue.global(qos: .utility).async {
                if !release() { Self.cancel(token) }
            }
        }
        token.withLock { $0 = observation }
    }

    /// Stops releasing.
    package func cancel() {
        Self.cancel(token)
    }

    private static func cancel(_ token: Locked<DeviceObservation?>) {
        token.withLock { token in
            token?.cancel()
            token = nil
        }
    }
}
