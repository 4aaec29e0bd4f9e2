import DataProtection
import DataProtectionAgent
import DataProtectionGRDB
import DataProtectionScenarioTesting
import DataProtectionScenarios
import DataProtectionSQLite
import Foundation
import GRDB
import Testing

/// A consumer of every product the README shows, written as a newcomer would from the
/// README's tour: the store, a protected database, GRDB, the agent from Swift and a timeline.
@Suite("A consumer of every product")
struct ConsumerTests {
    @Test("the store, ProtectedDatabase and GRDB, as in the README's tour")
    func storeAndDatabases() throws {
        let folder = try TemporaryDirectory()
        let store = try ProtectedStore(creatingAt: folder.url.appendingPathComponent("store"), passcode: "1234",
                                       configuration: DeviceConfiguration(passcodeCost: .minimal))
        try store.device.unlock(passcode: "1234")

        let db = try ProtectedDatabase(atPath: "Library/app.db", in: store, create: true,
                                       protection: .complete, journalMode: .wal)
        try db.execute("CREATE TABLE IF NOT EXISTS note(id INTEGER PRIMARY KEY, body TEXT)")
        try db.execute("INSERT INTO note(body) VALUES (?)", [.text("hello")])
        #expect(try db.query("SELECT body FROM note").count == 1)

        let queue = try DatabaseQueue(protectedAtPath: "Library/grdb.sqlite", in: store, protection: .complete)
        try queue.write { database in
            try database.execute(sql: "CREATE TABLE player(name TEXT)")
            try database.execute(sql: "INSERT INTO player VALUES ('Arthur')")
        }
        #expect(try queue.read { try String.fetchOne($0, sql: "SELECT name FROM player") } == "Arthur")

        try store.device.lock()
        #expect(throws: DataProtectionError.self) { try db.execute("INSERT INTO note(body) VALUES ('x')") }
        do {
            try queue.write { try $0.execute(sql: "INSERT INTO player VALUES ('Ford')") }
            Issue.record("GRDB wrote to a locked complete database")
        } catch {
            #expect(DataProtectionError(grdb: error)?.code == .protectedDataUnavailable, "\(error)")
        }
    }

    @Test("an agent served from Swift and a client of it")
    func agentFromSwift() throws {
        let folder = try TemporaryDirectory()
        let store = try ProtectedStore(creatingAt: folder.url.appendingPathComponent("store"), passcode: "1234",
                                       configuration: DeviceConfiguration(passcodeCost: .minimal))
        let socketPath = folder.url.appendingPathComponent("run/agent.sock").path
        try FileManager.default.createDirectory(atPath: (socketPath as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let server = try AgentServer(store: store, socketPath: socketPath)
        let served = Thread { server.run() }
        served.start()
        defer {
            server.stop()
            while FileManager.default.fileExists(atPath: socketPath) { Thread.sleep(forTimeInterval: 0.01) }
        }

        let client = try AgentStore(socketPath: socketPath)
        try client.device.unlock(passcode: "1234")
        try client.write(Data("hello".utf8), to: "Documents/notes.txt", protection: .complete, options: [])
        #expect(try client.contents(atPath: "Documents/notes.txt") == Data("hello".utf8))
        try client.device.lock()
    }

    @Test("a lock timeline in Swift Testing")
    func timeline() {
        Timeline("complete file locks with the device", passcode: "1234")
            .unlock("1234")
            .put("Documents/log.txt", "hello", class: .complete)
            .lock()
            .get("Documents/log.txt", expect: .error(.protectedDataUnavailable))
            .assertPasses()
    }
}
