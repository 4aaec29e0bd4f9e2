import DataProtection
import Foundation

/// What a statement does: one case per statement of the scenario language.
public enum Action: Sendable, Hashable, CustomStringConvertible {
    // MARK: Device
    /// `unlock [<passcode>]` (`nil`: a bare unlock).
    case unlock(passcode: String?)
    /// `lock`
    case lock
    /// `reboot`
    case reboot
    /// `crash`
    case crash
    /// `advance <duration>`
    case advance(Duration)
    /// `set-passcode <new>`
    case setPasscode(String)
    /// `change-passcode <old> <new>`
    case changePasscode(old: String, new: String)
    /// `remove-passcode <old>`
    case removePasscode(old: String)
    /// `erase`
    case erase
    /// `expect state …`, `expect available …`, and the other built-in checks.
    case expect(DeviceCheck)

    // MARK: Files
    /// `mkdir <path> [class=<class>]`
    case mkdir(path: String, protection: ProtectionClass?)
    /// `put <path> <data> [class=<class>]`
    case put(path: String, data: Data, protection: ProtectionClass?)
    /// `get <path>`
    case get(path: String)
    /// `rm <path>`
    case rm(path: String)
    /// `mv <from> <to>`
    case mv(from: String, to: String)
    /// `cp <from> <to> [class=<class>]`
    case cp(from: String, to: String, protection: ProtectionClass?)
    /// `ls <dir>`
    case ls(path: String)
    /// `stat <path>`
    case stat(path: String)
    /// `set-class <path> <class>`
    case setClass(path: String, protection: ProtectionClass)

    // MARK: Handles
    /// `open <path> as <h> [mode=…] [create] [class=…]`
    case open(path: String, handle: String, mode: ProtectedFileHandle.Mode, create: Bool, protection: ProtectionClass?)
    /// `<h>.read <size>`
    case read(handle: String, count: UInt64)
    /// `<h>.read-to-end`
    case readToEnd(handle: String)
    /// `<h>.write <data>`
    case write(handle: String, data: Data)
    /// `<h>.seek <offset>`
    case seek(handle: String, offset: UInt64)
    /// `<h>.seek-end`
    case seekToEnd(handle: String)
    /// `<h>.offset`
    case offset(handle: String)
    /// `<h>.size`
    case size(handle: String)
    /// `<h>.truncate <size>`
    case truncate(handle: String, size: UInt64)
    /// `<h>.sync`
    case sync(handle: String)
    /// `<h>.close`
    case close(handle: String)

    // MARK: Databases (version 1.1)
    /// `db open <path> as <d> [create] [class=<class>] [wal]`
    case openDatabase(path: String, database: String, create: Bool, protection: ProtectionClass?, wal: Bool)
    /// `<d>.exec "<sql>"`
    case exec(database: String, sql: String)
    /// `<d>.query "<sql>"`
    case query(database: String, sql: String)
    /// `<d>.close`
    case closeDatabase(database: String)

    /// The statement in the scenario language.
    public var description: String {
        switch self {
        case .unlock(let passcode): passcode.map { "unlock \(Self.word($0))" } ?? "unlock"
        case .lock: "lock"
        case .reboot: "reboot"
        case .crash: "crash"
        case .advance(let duration): "advance \(DurationValue.format(duration))"
        case .setPasscode(let new): "set-passcode \(Self.word(new))"
        case .changePasscode(let old, let new): "change-passcode \(Self.word(old)) \(Self.word(new))"
        case .removePasscode(let old): "remove-passcode \(Self.word(old))"
        case .erase: "erase"
        case .expect(let check): "expect \(check)"
        case .mkdir(let path, let protection): "mkdir \(Self.word(path))\(Self.option(protection))"
        case .put(let path, let data, let protection): "put \(Self.word(path)) \(DataValue.format(data))\(Self.option(protection))"
        case .get(let path): "get \(Self.word(path))"
        case .rm(let path): "rm \(Self.word(path))"
        case .mv(let from, let to): "mv \(Self.word(from)) \(Self.word(to))"
        case .cp(let from, let to, let protection): "cp \(Self.word(from)) \(Self.word(to))\(Self.option(protection))"
        case .ls(let path): "ls \(Self.word(path))"
        case .stat(let path): "stat \(Self.word(path))"
        case .setClass(let path, let protection): "set-class \(Self.word(path)) \(protection)"
        case .open(let path, let handle, let mode, let create, let protection):
            "open \(Self.word(path)) as \(handle) mode=\(mode.rawValue)\(create ? " create" : "")\(Self.option(protection))"
        case .read(let handle, let count): "\(handle).read \(count)"
        case .readToEnd(let handle): "\(handle).read-to-end"
        case .write(let handle, let data): "\(handle).write \(DataValue.format(data))"
        case .seek(let handle, let offset): "\(handle).seek \(offset)"
        case .seekToEnd(let handle): "\(handle).seek-end"
        case .offset(let handle): "\(handle).offset"
        case .size(let handle): "\(handle).size"
        case .truncate(let handle, let size): "\(handle).truncate \(size)"
        case .sync(let handle): "\(handle).sync"
        case .close(let handle): "\(handle).close"
        case .openDatabase(let path, let database, let create, let protection, let wal):
            "db open \(Self.word(path)) as \(database)\(create ? " create" : "")\(Self.option(protection))\(wal ? " wal" : "")"
        case .exec(let database, let sql): "\(database).exec \(DataValue.quote(Data(sql.utf8)))"
        case .query(let database, let sql): "\(database).query \(DataValue.quote(Data(sql.utf8)))"
        case .closeDatabase(let database): "\(database).close"
        }
    }

    private static func option(_ protection: ProtectionClass?) -> String {
        protection.map { " class=\($0)" } ?? ""
    }

    /// A bare word when it reads back as one, else a string.
    static func word(_ text: String) -> String {
        let plain = !text.isEmpty && !text.contains { $0 == " " || $0 == "\t" || $0 == "\"" || $0 == "#" || $0.isNewline }
            && !text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
        return plain ? text : DataValue.quote(Data(text.utf8))
    }
}

/// The checks of the `expect` statements.
public enum DeviceCheck: Sendable, Hashable, CustomStringConvertible {
    /// `expect state booted|locked|unlocked`
    case state(DeviceState)
    /// `expect available <class>...`: an existing closed file of each class can be opened for reading now.
    case available([ProtectionClass])
    /// `expect unavailable <class>...`: … cannot be opened now.
    case unavailable([ProtectionClass])
    /// `expect events <name>...`: the notifications since the previous `expect events` (or `device`), in order.
    case events([DeviceNotification])
    /// `expect failed-attempts <n>`
    case failedAttempts(Int)
    /// `expect protected-data-available true|false`
    case protectedDataAvailable(Bool)

    public var description: String {
        switch self {
        case .state(let state): "state \(state)"
        case .available(let classes): (["available"] + classes.map(\.rawValue)).joined(separator: " ")
        case .unavailable(let classes): (["unavailable"] + classes.map(\.rawValue)).joined(separator: " ")
        case .events(let events): (["events"] + events.map(\.rawValue)).joined(separator: " ")
        case .failedAttempts(let count): "failed-attempts \(count)"
        case .protectedDataAvailable(let available): "protected-data-available \(available)"
        }
    }
}
