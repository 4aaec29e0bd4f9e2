import DataProtection
import SQLiteBridge

extension DataProtectionError {
    /// The error a SQLite failure means: the store's own error when a VFS call failed (a
    /// missing class key is `protectedDataUnavailable`, a tampered page `integrityFailure`),
    /// else `sqliteError` with SQLite's extended code and message.
    init(_ error: SQLiteError) {
        if let stored = error.storageError as? DataProtectionError {
            self = stored
            return
        }
        switch error.code {
        case SQLiteBridge.SQLiteResultCode.ioErrorAuthorization:
            self = DataProtectionError(.protectedDataUnavailable, "SQLite: \(error.message).", hint: "Unlock the device, then try again.")
        case SQLiteBridge.SQLiteResultCode.ioErrorData:
            self = DataProtectionError(.integrityFailure, "SQLite: \(error.message).")
        default:
            self = DataProtectionError(.sqliteError, "SQLite: \(error.message).", sqliteCode: error.code)
        }
    }
}
