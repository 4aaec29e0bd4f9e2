import Foundation

/// The one error type of DataProtection.
///
/// ``code`` is stable (the codes of the semantics contract) and is what programs
/// should match on; ``message`` is for humans and ``hint``, when present,
/// suggests what to do next. No secret ever appears in an error.
public struct DataProtectionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable error codes. Their raw values never change.
    public enum Code: String, Sendable, Hashable, CaseIterable, Codable {
        /// The class key needed is not in memory (device locked, or before first unlock).
        case protectedDataUnavailable
        /// The passcode did not unlock the keybag.
        case incorrectPasscode
        /// Too many failed attempts: the next one is allowed later (see ``DataProtectionError/retryAfter``).
        case passcodeAttemptsDelayed
        /// The device was erased (after too many failed attempts).
        case deviceErased
        /// No file or directory at the path.
        case fileNotFound
        /// Something already exists at the path.
        case fileExists
        /// A path component that must be a directory is not one.
        case notADirectory
        /// The operation needs a file but found a directory.
        case isADirectory
        /// The directory must be empty for the operation.
        case directoryNotEmpty
        /// The handle was closed (or invalidated by a reboot).
        case handleClosed
        /// The handle's mode forbids the operation.
        case notPermitted
        /// Ciphertext or metadata was tampered with or is corrupt.
        case integrityFailure
        /// The path is empty, has a `..` component or a NUL byte.
        case invalidPath
        /// An argument is out of range or does not make sense here.
        case invalidArgument
        /// Another process owns the store, and the wait for it timed out
        /// (``DeviceConfiguration/ownershipTimeout``).
        case storeBusy
        /// The operating system refused an I/O operation (disk full, permission, I/O error).
        /// An addition to the contract's codes: none of them describes a failing disk.
        case ioFailure
        /// SQLite refused a statement for a reason of its own (syntax, constraint, busy, …):
        /// ``DataProtectionError/sqliteCode`` holds SQLite's extended result code. A failure
        /// from the class rules or the store inside SQLite keeps its own code instead
        /// (`protectedDataUnavailable`, `integrityFailure`, …). The code of scenario language 1.1.
        case sqliteError
    }

    /// The stable code.
    public let code: Code
    /// What went wrong, for humans.
    public let message: String
    /// What to do about it, when there is something to say.
    public let hint: String?
    /// For ``Code/passcodeAttemptsDelayed``: how long until the next attempt is allowed.
    public let retryAfter: Duration?
    /// For ``Code/sqliteError``: SQLite's extended result code (`SQLITE_CONSTRAINT_UNIQUE` is 2067).
    public let sqliteCode: Int32?

    /// Creates an error.
    public init(_ code: Code, _ message: String, hint: String? = nil, retryAfter: Duration? = nil, sqliteCode: Int32? = nil) {
        self.code = code
        self.message = message
        self.hint = hint
        self.retryAfter = retryAfter
        self.sqliteCode = sqliteCode
    }

    /// `message (code)`.
    public var description: String { "\(message) (\(code.rawValue))" }
}

extension DataProtectionError: LocalizedError, CustomDebugStringConvertible {
    /// The message, the code and the hint: what `localizedDescription` shows (instead of
    /// Foundation's "The operation could not be completed").
    public var errorDescription: String? { debugDescription }

    /// `message (code) hint`: what an uncaught error prints, so the hint is never lost.
    public var debugDescription: String {
        guard let hint else { return description }
        return "\(description) \(hint)"
    }

    /// The hint, when there is one.
    public var recoverySuggestion: String? { hint }
}

extension DataProtectionError {
    static func integrity(_ message: String, hint: String? = nil) -> DataProtectionError {
        DataProtectionError(.integrityFailure, message, hint: hint)
    }

    static func unavailable(_ message: String) -> DataProtectionError {
        DataProtectionError(.protectedDataUnavailable, message, hint: "Unlock the device, then try again.")
    }

    static func invalidArgument(_ message: String, hint: String? = nil) -> DataProtectionError {
        DataProtectionError(.invalidArgument, message, hint: hint)
    }
}
