import DataProtection
import DataProtectionAgent
import DataProtectionBackup
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

    @Test("keychain items and a backup restored on a second device, as in the README's tour")
    func itemsAndBackups() throws {
        let folder = try TemporaryDirectory()
        let configuration = DeviceConfiguration(passcodeCost: .minimal)
        let store = try ProtectedStore(creatingAt: folder.url.appendingPathComponent("store"), passcode: "1234", configuration: configuration)
        try store.device.unlock(passcode: "1234")
        try store.keychain.setSecret(ItemSecret("s3cret"), service: "mail", account: "ann")
        try store.write(Data("dear diary".utf8), to: "Documents/diary.txt", protection: .complete)

        let key = AgeIdentity.generate()
        let archive = folder.url.appendingPathComponent("store.age")
        #expect(FileManager.default.createFile(atPath: archive.path, contents: nil))
        let output = try FileHandle(forWritingTo: archive)
        try Backup.create(of: store, device: store.device, to: .fileDescriptor(.init(rawValue: output.fileDescriptor)),
                          recipients: [key.recipient!], items: KeychainBackupItems(store.keychain))
        try output.close()

        let other = try ProtectedStore(creatingAt: folder.url.appendingPathComponent("other"), passcode: "5678", configuration: configuration)
        try other.device.unlock(passcode: "5678")
        let input = try FileHandle(forReadingFrom: archive)
        try Backup.restore(from: .fileDescriptor(.init(rawValue: input.fileDescriptor)), identities: [key], into: other,
                           items: KeychainBackupItems(other.keychain))
        try input.close()
        #expect(try other.contents(atPath: "Documents/diary.txt") == Data("dear diary".utf8))
        #expect(try other.keychain.secret(service: "mail", account: "ann").secretString == "s3cret")
    }
}
