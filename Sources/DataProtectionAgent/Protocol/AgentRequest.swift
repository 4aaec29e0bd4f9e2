import DataProtection
import DataProtectionSQLite
import Foundation

/// One request from a client to the agent (`Keys/agent-protocol.md`, "Requests").
///
/// A request frame is its operation code, one byte, then its fields. Requests that
/// move bulk data through a descriptor (`readFile`, `writeFile` without inline data,
/// `sqlStream`) carry that descriptor with the frame (`SCM_RIGHTS`).
public enum AgentRequest: Sendable, Hashable {
    case hello(version: UInt32)
    case status
    case unlock(passcode: Passcode?)
    case lock
    case readFile(path: String)
    case writeFile(path: String, protection: ProtectionClass?, exclusive: Bool, source: AgentWriteSource)
    case attributes(path: String)
    case list(path: String)
    case createDirectory(path: String, intermediates: Bool, protection: ProtectionClass?)
    case remove(path: String)
    case move(from: String, to: String)
    case copy(from: String, to: String, protection: ProtectionClass?)
    case setProtection(path: String, protection: ProtectionClass)
    case open(path: String, mode: ProtectedFileHandle.Mode, create: Bool, protection: ProtectionClass?)
    case read(handle: UInt32, offset: UInt64?, count: UInt32)
    case write(handle: UInt32, offset: UInt64?, data: Data)
    case seek(handle: UInt32, offset: UInt64)
    case seekToEnd(handle: UInt32)
    case offset(handle: UInt32)
    case size(handle: UInt32)
    case truncate(handle: UInt32, offset: UInt64)
    case synchronize(handle: UInt32)
    case close(handle: UInt32)
    case watch
    case setPasscode(Passcode)
    case changePasscode(from: Passcode, to: Passcode)
    case removePasscode(Passcode)
    case erase
    case stop
    case sql(path: String, create: Bool, protection: ProtectionClass?, statements: String)
    /// Statements streamed through the passed socket, rows streamed back (version 2);
    /// `keepGoing`: a statement that fails does not end the stream (a terminal's session).
    case sqlStream(path: String, create: Bool, protection: ProtectionClass?, keepGoing: Bool)
    /// Keychain items (`Keys/agent-protocol.md` §4, codes 40-49).
    case itemAdd(label: String, attributes: [String: String], accessibility: ItemAccessibility, replacing: Bool, secret: ItemSecret)
    case itemSearch(attributes: [String: String], accessibilities: Set<ItemAccessibility>)
    case itemByID(id: String)
    case itemSecret(id: String)
    case itemUpdate(id: String, label: String?, attributes: [String: String]?, secret: ItemSecret?)
    case itemUpdateMatching(attributes: [String: String], label: String?, newAttributes: [String: String]?, secret: ItemSecret?)
    case itemDelete(id: String)
    case itemDeleteMatching(attributes: [String: String])
    case itemGeneration
    /// An update that also changes the item's accessibility (code 49).
    case itemUpdateAccessibility(id: String, accessibility: ItemAccessibility, label: String?, attributes: [String: String]?, secret: ItemSecret?)
    /// A backup of the whole store made by the agent at one instant, its age ciphertext written
    /// into the passed descriptor (code 50, `Keys/agent-protocol.md` §4): to the X25519
    /// `recipients` (`age1…`), or to `passphrase` with scrypt's `workFactor`; `items`: with
    /// the migratable keychain items.
    case backupCreate(recipients: [String], passphrase: Passcode?, workFactor: UInt8, items: Bool)

    /// The operation code (the frame's first byte).
    public var operation: UInt8 {
        switch self {
        case .hello: 1
        case .status: 2
        case .unlock: 3
        case .lock: 4
        case .readFile: 5
        case .writeFile: 6
        case .attributes: 7
        case .list: 8
        case .createDirectory: 9
        case .remove: 10
        case .move: 11
        case .copy: 12
        case .setProtection: 13
        case .open: 14
        case .read: 15
        case .write: 16
        case .seek: 17
        case .seekToEnd: 18
        case .offset: 19
        case .size: 20
        case .truncate: 21
        case .synchronize: 22
        case .close: 23
        case .watch: 24
        case .setPasscode: 25
        case .changePasscode: 26
        case .removePasscode: 27
        case .erase: 28
        case .stop: 29
        case .sql: 30
        case .sqlStream: 31
        case .itemAdd: 40
        case .itemSearch: 41
        case .itemByID: 42
        case .itemSecret: 43
        case .itemUpdate: 44
        case .itemUpdateMatching: 45
        case .itemDelete: 46
        case .itemDeleteMatching: 47
        case .itemGeneration: 48
        case .itemUpdateAccessibility: 49
        case .backupCreate: 50
        }
    }

    /// Whether the request holds a passcode or an item's secret (its frame is wiped once sent or read).
    var carriesPasscode: Bool {
        switch self {
        case .unlock, .setPasscode, .changePasscode, .removePasscode, .itemAdd: true
        case .backupCreate(_, let passphrase, _, _): passphrase != nil
        case .itemUpdate(_, _, _, let secret), .itemUpdateMatching(_, _, _, let secret): secret != nil
        case .itemUpdateAccessibility(_, _, _, _, let secret): secret != nil
        default: false
        }
    }

    /// Whether the request may carry a descriptor.
    var takesDescriptor: Bool {
        switch self {
        case .readFile, .sqlStream, .backupCreate: true
        case .writeFile(_, _, _, let source): source.inlineData == nil
        default: false
        }
    }

    /// Whether the request changes the store, its databases or its items: it waits while an
    /// agent-side backup runs (``AgentStoreGate``). `sqlStream` takes the gate per batch.
    var changesStore: Bool {
        switch self {
        case .writeFile, .createDirectory, .remove, .move, .copy, .setProtection, .write, .truncate, .synchronize, .close, .sql,
             .itemAdd, .itemUpdate, .itemUpdateMatching, .itemDelete, .itemDeleteMatching:
            true
        case .open(_, let mode, let create, _): create || mode != .read
        default: false
        }
    }

    /// Whether the request counts as use of the device for auto-lock (observing does not).
    var countsAsActivity: Bool {
        switch self {
        case .hello, .status, .watch: false
        default: true
        }
    }

    /// The frame payload.
    package func encoded() -> [UInt8] {
        var writer = AgentFieldWriter()
        writer.u8(operation)
        switch self {
        case .hello(let version): writer.u32(version)
        case .status, .lock, .watch, .erase, .stop: break
        case .unlock(let passcode): writer.optional(passcode) { $0.passcode($1) }
        case .readFile(let path), .attributes(let path), .list(let path), .remove(let path):
            writer.string(path)
        case .writeFile(let path, let protection, let exclusive, let source):
            writer.string(path)
            writer.protectionClass(protection)
            writer.bool(exclusive)
            switch source {
            case .inline(let data):
                writer.u8(0)
                writer.data(data)
            case .descriptor: writer.u8(1)
            case .pieces: writer.u8(2)
            }
        case .createDirectory(let path, let intermediates, let protection):
            writer.string(path)
            writer.bool(intermediates)
            writer.protectionClass(protection)
        case .move(let source, let destination):
            writer.string(source)
            writer.string(destination)
        case .copy(let source, let destination, let protection):
            writer.string(source)
            writer.string(destination)
            writer.protectionClass(protection)
        case .setProtection(let path, let protection):
            writer.string(path)
            writer.protectionClass(protection)
        case .open(let path, let mode, let create, let protection):
            writer.string(path)
            writer.u8(UInt8(AgentWireFormat.modes.firstIndex(of: mode)!))
            writer.bool(create)
            writer.protectionClass(protection)
        case .read(let handle, let offset, let count):
            writer.u32(handle)
            writer.optional(offset) { $0.u64($1) }
            writer.u32(count)
        case .write(let handle, let offset, let data):
            writer.u32(handle)
            writer.optional(offset) { $0.u64($1) }
            writer.data(data)
        case .seek(let handle, let offset), .truncate(let handle, let offset):
            writer.u32(handle)
            writer.u64(offset)
        case .seekToEnd(let handle), .offset(let handle), .size(let handle), .synchronize(let handle), .close(let handle):
            writer.u32(handle)
        case .setPasscode(let passcode), .removePasscode(let passcode):
            writer.passcode(passcode)
        case .changePasscode(let old, let new):
            writer.passcode(old)
            writer.passcode(new)
        case .sql(let path, let create, let protection, let statements):
            writer.string(path)
            writer.bool(create)
            writer.protectionClass(protection)
            writer.data(Array(statements.utf8))
        case .sqlStream(let path, let create, let protection, let keepGoing):
            writer.string(path)
            writer.bool(create)
            writer.protectionClass(protection)
            writer.bool(keepGoing)
        case .itemAdd(let label, let attributes, let accessibility, let replacing, let secret):
            writer.string(label)
            writer.attributes(attributes)
            writer.accessibility(accessibility)
            writer.bool(replacing)
            writer.secret(secret)
        case .itemSearch(let attributes, let accessibilities):
            writer.attributes(attributes)
            writer.accessibilities(accessibilities)
        case .itemByID(let id), .itemSecret(let id), .itemDelete(let id):
            writer.string(id)
        case .itemUpdate(let id, let label, let attributes, let secret):
            writer.string(id)
            writer.optional(label) { $0.string($1) }
            writer.optional(attributes) { $0.attributes($1) }
            writer.optional(secret) { $0.secret($1) }
        case .itemUpdateMatching(let attributes, let label, let newAttributes, let secret):
            writer.attributes(attributes)
            writer.optional(label) { $0.string($1) }
            writer.optional(newAttributes) { $0.attributes($1) }
            writer.optional(secret) { $0.secret($1) }
        case .itemDeleteMatching(let attributes):
            writer.attributes(attributes)
        case .itemGeneration:
            break
        case .itemUpdateAccessibility(let id, let accessibility, let label, let attributes, let secret):
            writer.string(id)
            writer.accessibility(accessibility)
            writer.optional(label) { $0.string($1) }
            writer.optional(attributes) { $0.attributes($1) }
            writer.optional(secret) { $0.secret($1) }
        case .backupCreate(let recipients, let passphrase, let workFactor, let items):
            writer.u32(UInt32(recipients.count))
            for recipient in recipients { writer.string(recipient) }
            writer.optional(passphrase) { $0.passcode($1) }
            writer.u8(workFactor)
            writer.bool(items)
        }
        return writer.bytes
    }

    /// Decodes a request frame's payload; anything malformed is a violation.
    public static func decode(_ payload: [UInt8]) throws(AgentProtocolViolation) -> AgentRequest {
        var reader = AgentFieldReader(payload)
        let operation = try reader.u8()
        let request: AgentRequest
        switch operation {
        case 1: request = .hello(version: try reader.u32())
        case 2: request = .status
        case 3: request = .unlock(passcode: try reader.optional { reader throws(AgentProtocolViolation) in try reader.passcode() })
        case 4: request = .lock
        case 5: request = .readFile(path: try reader.string())
        case 6:
            let (path, protection, exclusive) = (try reader.string(), try reader.protectionClass(), try reader.bool())
            let source: AgentWriteSource
            switch try reader.u8() {
            case 0: source = .inline(Data(try reader.data()))
            case 1: source = .descriptor
            case 2: source = .pieces
            case let kind: throw AgentProtocolViolation("write source \(kind)")
            }
            request = .writeFile(path: path, protection: protection, exclusive: exclusive, source: source)
        case 7: request = .attributes(path: try reader.string())
        case 8: request = .list(path: try reader.string())
        case 9: request = .createDirectory(path: try reader.string(), intermediates: try reader.bool(), protection: try reader.protectionClass())
        case 10: request = .remove(path: try reader.string())
        case 11: request = .move(from: try reader.string(), to: try reader.string())
        case 12: request = .copy(from: try reader.string(), to: try reader.string(), protection: try reader.protectionClass())
        case 13: request = .setProtection(path: try reader.string(), protection: try reader.requiredClass())
        case 14:
            request = .open(path: try reader.string(), mode: try reader.element(of: AgentWireFormat.modes, "handle mode"),
                            create: try reader.bool(), protection: try reader.protectionClass())
        case 15:
            request = .read(handle: try reader.u32(), offset: try reader.optional { reader throws(AgentProtocolViolation) in try reader.u64() },
                            count: try reader.u32())
        case 16:
            request = .write(handle: try reader.u32(), offset: try reader.optional { reader throws(AgentProtocolViolation) in try reader.u64() },
                             data: Data(try reader.data()))
        case 17: request = .seek(handle: try reader.u32(), offset: try reader.u64())
        case 18: request = .seekToEnd(handle: try reader.u32())
        case 19: request = .offset(handle: try reader.u32())
        case 20: request = .size(handle: try reader.u32())
        case 21: request = .truncate(handle: try reader.u32(), offset: try reader.u64())
        case 22: request = .synchronize(handle: try reader.u32())
        case 23: request = .close(handle: try reader.u32())
        case 24: request = .watch
        case 25: request = .setPasscode(try reader.passcode())
        case 26: request = .changePasscode(from: try reader.passcode(), to: try reader.passcode())
        case 27: request = .removePasscode(try reader.passcode())
        case 28: request = .erase
        case 29: request = .stop
        case 30:
            let (path, create, protection) = (try reader.string(), try reader.bool(), try reader.protectionClass())
            guard let statements = String(validating: try reader.data(), as: UTF8.self) else {
                throw AgentProtocolViolation("SQL that is not UTF-8")
            }
            request = .sql(path: path, create: create, protection: protection, statements: statements)
        case 31:
            request = .sqlStream(path: try reader.string(), create: try reader.bool(), protection: try reader.protectionClass(),
                                 keepGoing: try reader.bool())
        case 40:
            request = .itemAdd(label: try reader.string(), attributes: try reader.attributes(), accessibility: try reader.accessibility(),
                               replacing: try reader.bool(), secret: try reader.secret())
        case 41: request = .itemSearch(attributes: try reader.attributes(), accessibilities: try reader.accessibilities())
        case 42: request = .itemByID(id: try reader.string())
        case 43: request = .itemSecret(id: try reader.string())
        case 44:
            request = .itemUpdate(
                id: try reader.string(), label: try reader.optional { reader throws(AgentProtocolViolation) in try reader.string() },
                attributes: try reader.optional { reader throws(AgentProtocolViolation) in try reader.attributes() },
                secret: try reader.optional { reader throws(AgentProtocolViolation) in try reader.secret() })
        case 45:
            request = .itemUpdateMatching(
                attributes: try reader.attributes(), label: try reader.optional { reader throws(AgentProtocolViolation) in try reader.string() },
                newAttributes: try reader.optional { reader throws(AgentProtocolViolation) in try reader.attributes() },
                secret: try reader.optional { reader throws(AgentProtocolViolation) in try reader.secret() })
        case 46: request = .itemDelete(id: try reader.string())
        case 47: request = .itemDeleteMatching(attributes: try reader.attributes())
        case 48: request = .itemGeneration
        case 49:
            request = .itemUpdateAccessibility(
                id: try reader.string(), accessibility: try reader.accessibility(),
                label: try reader.optional { reader throws(AgentProtocolViolation) in try reader.string() },
                attributes: try reader.optional { reader throws(AgentProtocolViolation) in try reader.attributes() },
                secret: try reader.optional { reader throws(AgentProtocolViolation) in try reader.secret() })
        case 50:
            let count = try reader.u32()
            guard count <= AgentWireFormat.maximumBackupRecipients else { throw AgentProtocolViolation("\(count) backup recipients") }
            var recipients: [String] = []
            for _ in 0..<count { recipients.append(try reader.string()) }
            request = .backupCreate(recipients: recipients, passphrase: try reader.optional { reader throws(AgentProtocolViolation) in try reader.passcode() },
                                    workFactor: try reader.u8(), items: try reader.bool())
        default: throw AgentProtocolViolation("unknown operation \(operation)")
        }
        try reader.finish()
        return request
    }
}

/// Where a `writeFile` request's content comes from.
public enum AgentWriteSource: Sendable, Hashable {
    /// In the request frame (at most ``AgentWireFormat/maximumInlineData`` bytes).
    case inline(Data)
    /// The descriptor passed with the request, read to its end (a client's file or pipe).
    case descriptor
    /// The descriptor passed with the request, carrying pieces: each a 4-byte big-endian
    /// length and that many bytes, up to a piece of length 0. The stream ending before that
    /// piece aborts the write (nothing is stored).
    case pieces

    var inlineData: Data? {
        if case .inline(let data) = self { return data }
        return nil
    }
}
