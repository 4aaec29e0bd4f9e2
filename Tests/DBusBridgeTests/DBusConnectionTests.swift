import DBusBridge
import Foundation
import Synchronization
import TestSupport
import Testing

/// The bridge against a private `dbus-daemon`: two connections, one exporting an object and
/// owning a name, the other calling it, matching its signals, reading its properties.
@Suite("D-Bus connection", .serialized)
struct DBusConnectionTests {
    static let name = "org.example.DataProtectionTest"
    static let interface = "org.example.Echo"

    /// A server exporting /org/example/echo: `Echo` returns its arguments, `Fail` answers an
    /// error, properties Get/GetAll/Set on one `Label` property.
    static func serve(_ server: DBusConnection) throws -> DBusRegistration {
        let label = Mutex("first")
        return try server.exportObject(at: "/org/example/echo") { message throws(DBusError) in
            if message.isMethodCall(interface, "Echo") {
                try message.reply(message.arguments)
                return true
            }
            if message.isMethodCall(interface, "Fail") {
                throw DBusError(name: "org.example.Error.Refused", message: "refused: \(message.arguments.first?.stringValue ?? "")")
            }
            if message.isMethodCall("org.freedesktop.DBus.Properties", "Get") {
                try message.reply([.variant(.string(label.withLock { $0 }))])
                return true
            }
            if message.isMethodCall("org.freedesktop.DBus.Properties", "GetAll") {
                try message.reply([.properties(["Label": .string(label.withLock { $0 })])])
                return true
            }
            if message.isMethodCall("org.freedesktop.DBus.Properties", "Set") {
                guard message.arguments.count == 3, let value = message.arguments[2].unwrapped.stringValue else {
                    throw .invalidArguments("Set takes (ssv) with a string")
                }
                label.withLock { $0 = value }
                try message.reply()
                return true
            }
            return false
        }
    }

    /// Runs `body` with a private bus, a server owning ``name`` and serving ``serve(_:)``, and a
    /// client connection; everything closed at the end.
    static func withEcho(_ body: (_ client: DBusConnection) throws -> Void) throws {
        let bus = try PrivateBus()
        let server = try DBusConnection(.address(bus.address))
        let client = try DBusConnection(.address(bus.address))
        defer {
            client.close()
            server.close()
        }
        #expect(try server.requestName(name) == .primaryOwner)
        let registration = try serve(server)
        defer { registration.cancel() }
        try body(client)
    }

    @Test("a method call carries every type there and back: strings, paths, byte arrays, structs, dictionaries, variants")
    func roundTrip() throws {
        try Self.withEcho { client in
            let secret = DBusValue.structure([.objectPath("/org/freedesktop/secrets/session/1"), .bytes(Data([0, 1, 2, 255])),
                                              .bytes(Data("value".utf8)), .string("text/plain")])
            let arguments: [DBusValue] = [
                .string("héllo"), .objectPath("/a/b"), .bytes(Data()), .bytes(Data(repeating: 7, count: 70_000)),
                .boolean(true), .byte(9), .int16(-2), .uint16(3), .int32(-4), .uint32(5), .int64(-6), .uint64(7), .double(0.5),
                .signature("a{sv}"),
                .properties(["Label": .string("x"), "Count": .uint32(2), "Nested": .variant(.strings(["a", "b"]))]),
                .stringDictionary(["xdg:schema": "org.example", "user": "me"]),
                .dictionary(keySignature: "o", valueSignature: "(oayays)", [(.objectPath("/item/1"), secret)]),
                .array(element: "(oayays)", [secret, secret]),
                .array(element: "s", []), .objectPaths(["/x", "/y"]),
                .variant(.structure([.int32(1), .string("two")])),
            ]
            let reply = try client.call(Self.name, path: "/org/example/echo", interface: Self.interface, member: "Echo", arguments)
            #expect(reply == arguments)
            #expect(reply.map(\.signature).joined() == "soayaybynqiuxtdga{sv}a{ss}a{o(oayays)}a(oayays)asaov")
            #expect(reply[14].stringKeyedDictionary?["Count"] == .uint32(2))
            #expect(reply[15].stringKeyedDictionary?["user"] == .string("me"))
            #expect(reply[3].bytesValue?.count == 70_000)
        }
    }

    @Test("an error reply reaches the caller with its name and message; an unknown method is UnknownMethod")
    func errors() throws {
        try Self.withEcho { client in
            #expect(throws: DBusError(name: "org.example.Error.Refused", message: "refused: now")) {
                try client.call(Self.name, path: "/org/example/echo", interface: Self.interface, member: "Fail", [.string("now")])
            }
            do throws(DBusError) {
                _ = try client.call(Self.name, path: "/org/example/echo", interface: Self.interface, member: "Nothing")
                Issue.record("an unknown method answered")
            } catch {
                #expect(error.name == "org.freedesktop.DBus.Error.UnknownMethod")
            }
            do throws(DBusError) {
                _ = try client.call("org.example.Nobody", path: "/", interface: Self.interface, member: "Echo")
                Issue.record("a name nobody owns answered")
            } catch {
                #expect(error.name == "org.freedesktop.DBus.Error.ServiceUnknown")
            }
        }
    }

    @Test("properties: Get, GetAll and Set through the helpers")
    func properties() throws {
        try Self.withEcho { client in
            #expect(try client.property(Self.name, path: "/org/example/echo", interface: Self.interface, name: "Label") == .string("first"))
            _ = try client.call(Self.name, path: "/org/example/echo", interface: "org.freedesktop.DBus.Properties", member: "Set",
                                [.string(Self.interface), .string("Label"), .variant(.string("second"))])
            #expect(try client.properties(Self.name, path: "/org/example/echo", interface: Self.interface) == ["Label": .string("second")])
        }
    }

    @Test("a name already owned is reported with its owner; a fallback object answers every path below it")
    func namesAndFallback() throws {
        let bus = try PrivateBus()
        let first = try DBusConnection(.address(bus.address))
        let second = try DBusConnection(.address(bus.address))
        defer {
            first.close()
            second.close()
        }
        #expect(try first.requestName(Self.name) == .primaryOwner)
        #expect(try first.requestName(Self.name) == .alreadyOwner)
        #expect(try second.requestName(Self.name) == .taken(owner: first.uniqueName))
        #expect(try second.owner(of: Self.name) == first.uniqueName)
        #expect(try second.owner(of: "org.example.Nobody") == nil)
        let registration = try first.exportObject(at: "/org/example/items", fallback: true) { message throws(DBusError) in
            try message.reply([.objectPath(message.path ?? "")])
            return true
        }
        defer { registration.cancel() }
        let reply = try second.call(Self.name, path: "/org/example/items/7", interface: Self.interface, member: "Where")
        #expect(reply == [.objectPath("/org/example/items/7")])
    }

    @Test("a matched signal reaches its handler with its arguments; a cancelled match no longer does")
    func signals() throws {
        let bus = try PrivateBus()
        let emitter = try DBusConnection(.address(bus.address))
        let listener = try DBusConnection(.address(bus.address))
        defer {
            emitter.close()
            listener.close()
        }
        let received = Mutex<[[DBusValue]]>([])
        let arrived = DispatchSemaphore(value: 0)
        let match = try listener.matchSignal(interface: Self.interface, member: "Changed") { message in
            received.withLock { $0.append(message.arguments) }
            arrived.signal()
        }
        try emitter.emitSignal(path: "/org/example/echo", interface: Self.interface, member: "Changed", [.boolean(true), .string("a")])
        #expect(arrived.wait(timeout: .now() + 5) == .success)
        #expect(received.withLock { $0 } == [[.boolean(true), .string("a")]])
        // Another member does not match.
        try emitter.emitSignal(path: "/org/example/echo", interface: Self.interface, member: "Other", [.boolean(false)])
        match.cancel()
        // A round trip through the listener's thread: the cancel has run when this answers.
        _ = try listener.owner(of: "org.freedesktop.DBus")
        try emitter.emitSignal(path: "/org/example/echo", interface: Self.interface, member: "Changed", [.boolean(false), .string("b")])
        #expect(arrived.wait(timeout: .now() + 0.5) == .timedOut)
        #expect(received.withLock { $0.count } == 1)
    }

    @Test("the daemon killed: disconnection handlers run, calls fail as disconnected, nothing hangs")
    func busGoesAway() throws {
        let bus = try PrivateBus()
        let connection = try DBusConnection(.address(bus.address))
        defer { connection.close() }
        let lost = DispatchSemaphore(value: 0)
        connection.whenDisconnected { lost.signal() }
        #expect(connection.isConnected)
        bus.kill()
        #expect(lost.wait(timeout: .now() + 5) == .success)
        #expect(!connection.isConnected)
        #expect(throws: DBusError.disconnected) {
            try connection.call("org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "GetId")
        }
        // Registered after the loss: runs at once.
        let late = DispatchSemaphore(value: 0)
        connection.whenDisconnected { late.signal() }
        #expect(late.wait(timeout: .now()) == .success)
    }

    @Test("no daemon at the address: connecting fails at once")
    func noDaemon() throws {
        #expect(throws: DBusError.self) {
            _ = try DBusConnection(.address("unix:path=/nonexistent/dbus-\(UUID().uuidString)"))
        }
    }

    @Test("a call from another thread while a handler calls back into its own connection")
    func reentrantHandlers() throws {
        let bus = try PrivateBus()
        let server = try DBusConnection(.address(bus.address))
        let client = try DBusConnection(.address(bus.address))
        defer {
            client.close()
            server.close()
        }
        _ = try server.requestName(Self.name)
        // The handler asks the bus for its own name's owner (a call on the owner thread) before answering.
        let registration = try server.exportObject(at: "/org/example/echo") { message throws(DBusError) in
            let owner = try server.owner(of: Self.name)
            try message.reply([.string(owner ?? "")])
            return true
        }
        defer { registration.cancel() }
        let replies = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let reply = try? client.call(Self.name, path: "/org/example/echo", interface: Self.interface, member: "Owner")
            replies.withLock { $0.append(reply?.first?.stringValue ?? "failed") }
        }
        #expect(replies.withLock { $0 } == Array(repeating: server.uniqueName, count: 8))
    }
}
