import CSQLite
import Foundation

/// The storage error behind the last failing VFS call of this thread.
///
/// SQLite reduces a VFS failure to a result code; the error that caused it (which class
/// key was missing, which file failed its integrity check) is kept here, per thread,
/// because SQLite runs a statement's VFS calls on the thread that steps it. The
/// ``SQLiteConnection`` clears it before each call and attaches it to the error after.
enum SQLiteStorageErrorSlot {
    private final class Box {
        let error: any Error
        init(_ error: any Error) { self.error = error }
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        #if os(Linux)
        let status = pthread_key_create(&key) { pointer in
            guard let pointer else { return }
            Unmanaged<Box>.fromOpaque(pointer).release()
        }
        #else
        let status = pthread_key_create(&key) { pointer in
            Unmanaged<Box>.fromOpaque(pointer).release()
        }
        #endif
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }()

    /// Keeps `error` as this thread's last storage error.
    static func record(_ error: any Error) {
        clear()
        pthread_setspecific(key, Unmanaged.passRetained(Box(error)).toOpaque())
    }

    /// This thread's last storage error, forgotten once taken.
    static func take() -> (any Error)? {
        guard let pointer = pthread_getspecific(key) else { return nil }
        pthread_setspecific(key, nil)
        return Unmanaged<Box>.fromOpaque(pointer).takeRetainedValue().error
    }

    /// Forgets this thread's last storage error.
    static func clear() {
        _ = take()
    }
}
