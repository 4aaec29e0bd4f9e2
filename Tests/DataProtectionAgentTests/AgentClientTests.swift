import DataProtection
import DataProtectionAgent
import DataProtectionSQLite
import Foundation
import SodiumBridge
import Testing

/// The library client against an agent: the surface of the in-process store, carried out
/// inside the agent under its device's class rules.
@Suite("Agent client")
struct AgentClientTests {
    @Test("whole files, large ones through a descriptor, and every item operation")
    func wholeFilesAndItems() throws {
        try withAgent { agent in
            let client = try agent.client()
            try client.device.unlock(passcode: "1234")
            try client.write(Data("hello".utf8), to: "docs/a.txt", protection: .complete, options: [])
            #expect(try client.contents(atPath: "docs/a.txt") == Data("hello".utf8))
            // Larger than a frame: pieces one way, a descriptor the other.
            let big = Data((0..<(3 << 20) + 17).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            try client.write(big, to: "big.bin")
            #expect(try client.contents(atPath: "big.bin") == big)
            #expect(try agent.store.contents(atPath: "big.bin") == big)
            let attributes = try client.attributesOfItem(atPath: "docs/a.txt")
            #expect(attributes.type == .file && attributes.size == 5 && attributes.protectionClass == .complete)
            #expect(try client.attributesOfItem(atPath: "docs").type == .directory)
            try client.createDirectory(atPath: "x/y", withIntermediateDirectories: true, protection: .none)
            #expect(try client.contentsOfDirectory(atPath: "/").sorted() == ["big.bin", "docs", "x"])
            try client.moveItem(atPath: "docs/a.txt", toPath: "x/y/b.txt")
            try client.copyItem(atPath: "x/y/b.txt", toPath: "c.txt", protection: .completeUntilFirstUserAuthentication)
            try client.setProtectionClass(.none, ofItemAtPath: "c.txt")
            #expect(try agent.store.attributesOfItem(atPath: "c.txt").protectionClass == .some(.none))
            #expect(client.fileExists(atPath: "x/y/b.txt") && !client.fileExists(atPath: "docs/a.txt"))
            try client.removeItem(atPath: "c.txt")
            expectCode(.fileNotFound) { _ = try client.contents(atPath: "c.txt") }
            expectCode(.fileExists) { try client.write(Data(), to: "big.bin", protection: nil, options: .withoutOverwriting) }
            expectCode(.invalidPath) { _ = try client.contents(atPath: "../etc/passwd") }
        }
    }

    @Test("a streamed write that fails half-way stores nothing, and the connection goes on")
    func abortedStreamingWrite() throws {
        let sourceFailed = DataProtectionError(.ioFailure, "The source failed.")
        try withAgent { agent in
            let client = try agent.client()
            try client.device.unlock(passcode: "1234")
            try client.write(Data("old".utf8), to: "f")
            var calls = 0
            #expect(throws: sourceFailed) {  // the source's own error, as it is
                try client.write(to: "f", protection: nil, exclusive: false) { () throws(DataProtectionError) -> Data? in
                    calls += 1
                    if calls == 3 { throw sourceFailed }
                    return Data(repeating: 7, count: 300_000)
                }
            }
            #expect(try client.contents(atPath: "f") == Data("old".utf8))
            var pieces = 0
            try client.write(to: "f") { () -> Data? in
                pieces += 1
                return pieces <= 4 ? Data(repeating: UInt8(pieces), count: 700_000) : nil
            }
            #expect(try client.contents(atPath: "f").count == 2_800_000)
        }
    }

    @Test("a client's complete handle follows the agent's lock: fails once locked, works after unlock")
    func handleFollowsTheAgentsLock() throws {
        try withAgent { agent in
            let client = try agent.client()
            try client.device.unlock(passcode: "1234")
            let handle = try client.openFile(atPath: "secret", mode: .update, create: true, protection: .complete)
            try handle.write(contentsOf: Data("one".utf8))
            try agent.device.lock()  // the agent's own device, not through this client
            expectCode(.protectedDataUnavailable) { try handle.write(contentsOf: Data("two".utf8)) }
            expectCode(.protectedDataUnavailable) { _ = try client.contents(atPath: "secret") }
            #expect(try client.device.state == .locked)
            #expect(try client.device.isAvailable(.complete) == false)
            try client.device.unlock(passcode: "1234")
            try handle.write(contentsOf: Data("two".utf8))
            try handle.seek(toOffset: 0)
            #expect(try handle.readToEnd() == Data("onetwo".utf8))
            #expect(try handle.size() == 6)
            try handle.close()
            expectCode(.handleClosed) { _ = try handle.size() }
        }
    }

    @Test("a client that disconnects has its handles closed and flushed: its writes survive a crash")
    func disconnectClosesHandles() throws {
        try withAgent { agent in
            let client = try agent.client()
            try client.device.unlock(passcode: "1234")
            let handle = try client.openFile(atPath: "log", mode: .update, create: true, protection: nil)
            try handle.write(contentsOf: Data(repeating: 1, count: 200_000))
            client.close()
            // The agent closes the handle when it sees the connection go; then a crash loses nothing.
            #expect(eventually { agent.server.connectionCount == 0 })
            try agent.device.crash()
            try agent.device.unlock(passcode: "1234")
            #expect(try agent.store.contents(atPath: "log") == Data(repeating: 1, count: 200_000))
        }
    }

    @Test("notifications reach a watching client in order")
    func notificationsInOrder() async throws {
        let fixture = try AgentFixture()
        defer { fixture.tearDown() }
        let client = try fixture.client()
        let events = try client.device.events()
        try client.device.unlock(passcode: "1234")
        try client.device.lock()
        try client.device.unlock(passcode: "1234")
        var received: [DeviceNotification] = []
        for await event in events {
            received.append(event.notification)
            if received.count == 3 { break }
        }
        #expect(received == [.protectedDataDidBecomeAvailable, .protectedDataWillBecomeUnavailable, .protectedDataDidBecomeAvailable])
    }

    @Test("auto-lock locks the device after the idle period with no request, and status counts it down")
    func autoLock() throws {
        try withAgent(autoLock: .milliseconds(600)) { agent in
            let client = try agent.client()
            try client.device.unlock(passcode: "1234")
            let status = try client.status()
            #expect(status.autoLock == .milliseconds(600))
            #expect(status.autoLockIn != nil)
            #expect(eventually { agent.device.state == .locked })
            #expect(try client.status().autoLockIn == nil)
            expectCode(.protectedDataUnavailable) { try client.write(Data("x".utf8), to: "a", protection: .complete, options: []) }
        }
    }

    @Test("beyond the connection limit, a client waits until another leaves, then is served")
    func connectionLimit() throws {
        let fixture = try AgentFixture(maximumConnections: 2)
        defer { fixture.tearDown() }
        var first: AgentStore? = try fixture.client()
        let second = try fixture.client()
        let third = Locked<AgentStore?>(nil)
        let served = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            third.withLock { $0 = try? fixture.client() }
            served.signal()
        }
        #expect(served.wait(timeout: .now() + 0.5) == .timedOut, "a third connection was served beyond the limit of 2")
        first?.close()
        first = nil
        #expect(served.wait(timeout: .now() + 10) == .success)
        #expect(try third.withLock { $0 }?.status().state == .booted)
        #expect(try second.status().state == .booted)
    }

    @Test("100 clients at once, each with its own connection")
    func hundredConcurrentClients() throws {
        try withAgent { agent in
            try agent.client().device.unlock(passcode: "1234")
            try agent.store.write(Data("shared".utf8), to: "shared")
            let failures = Locked([String]())
            DispatchQueue.concurrentPerform(iterations: 100) { index in
                do {
                    let client = try agent.client()
                    let mine = Data("client \(index)".utf8)
                    try client.write(mine, to: "clients/\(index)")
                    guard try client.contents(atPath: "clients/\(index)") == mine,
                          try client.contents(atPath: "shared") == Data("shared".utf8) else {
                        failures.withLock { $0.append("client \(index) read something else") }
                        return
                    }
                } catch {
                    failures.withLock { $0.append("client \(index): \(error)") }
                }
            }
            #expect(failures.withLock { $0 } == [])
            #expect(try agent.store.contentsOfDirectory(atPath: "clients").count == 100)
        }
    }

    @Test("chunks and lines stream through the agent's handles, and stop once the agent locks")
    func streaming() async throws {
        let fixture = try AgentFixture()
        defer { fixture.tearDown() }
        let client = try fixture.client()
        try client.device.unlock(passcode: "1234")
        let text = (0..<5000).map { "line \($0)" }.joined(separator: "\r\n")
        try client.write(Data(text.utf8), to: "log", protection: .complete, options: [])
        var lines: [String] = []
        for try await line in client.lines(atPath: "log") { lines.append(line) }
        #expect(lines.count == 5000 && lines.last == "line 4999" && lines.first == "line 0")
        var total = 0
        var pieces = client.chunks(atPath: "log", chunkSize: 10_000).makeAsyncIterator()
        total += try await pieces.next()?.count ?? 0
        try fixture.device.lock()
        await #expect(throws: DataProtectionError.self) { _ = try await pieces.next() }
        #expect(total == 10_000)
    }

    @Test("SQL runs in the agent: every value type comes back, errors keep their codes")
    func sql() throws {
        try withAgent { agent in
            let client = try agent.client()
            try client.device.unlock(passcode: "1234")
            let rows = try client.executeSQL("""
                create table t(i integer, r real, s text, b blob, n);
                insert into t values (42, 0.5, 'é', x'00ff', NULL);
                select * from t; select count(*) as c from t
                """, inDatabaseAtPath: "db/app.sqlite", create: true, protection: .complete)
            #expect(rows.count == 2)
            #expect(rows[0].values == [.integer(42), .real(0.5), .text("é"), .blob(Data([0, 255])), .null])
            #expect(rows[0].columns == ["i", "r", "s", "b", "n"])
            #expect(rows[0].texts[1] == "0.5")
            #expect(rows[1].columns == ["c"] && rows[1].values == [.integer(1)])
            #expect(try agent.store.attributesOfItem(atPath: "db/app.sqlite").protectionClass == .complete)
            do {
                _ = try client.executeSQL("insert into missing values (1)", inDatabaseAtPath: "db/app.sqlite")
                Issue.record("no error")
            } catch let error as DataProtectionError {
                #expect(error.code == .sqliteError && error.sqliteCode == 1)
            }
            try agent.device.lock()
            expectCode(.protectedDataUnavailable) { _ = try client.executeSQL("select 1 from t", inDatabaseAtPath: "db/app.sqlite") }
            expectCode(.fileNotFound) { _ = try client.executeSQL("select 1", inDatabaseAtPath: "nope") }
        }
    }

    @Test("statements and rows of any size go through the agent: a script of 3 MB in one transaction, 2 MB of rows, a 3 MB value, rows as they come")
    func sqlOfAnySize() throws {
        try withAgent { agent in
            let client = try agent.client()
            try client.device.unlock(passcode: "1234")
            // More than a frame holds (1 MiB), with one transaction across its pieces.
            var script = "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);\nBEGIN;\n"
            for id in 1...20_000 { script += "INSERT INTO t VALUES (\(id), '\(String(repeating: "v", count: 100)) \(id)');\n" }
            script += "COMMIT;\nSELECT count(*) FROM t"
            #expect(script.utf8.count > 2 << 20)
            #expect(try client.executeSQL(script, inDatabaseAtPath: "big.db", create: true).first?.values == [.integer(20_000)])
            // 20,000 rows of some 110 bytes: pieces of rows, in order.
            let rows = try client.executeSQL("SELECT id, v FROM t ORDER BY id", inDatabaseAtPath: "big.db")
            #expect(rows.count == 20_000)
            #expect(rows.enumerated().allSatisfy { $0.element.values.first == .integer(Int64($0.offset + 1)) })
            // One value larger than a piece's usual size goes alone in its piece.
            let large = try client.executeSQL("SELECT zeroblob(3000000) AS z, 'after'", inDatabaseAtPath: "big.db")
            #expect(large.count == 1 && large.first?.values == [.blob(Data(count: 3_000_000)), .text("after")])
            // A column named after a long expression (longer than a string field of the protocol's frames).
            let literal = "'" + String(repeating: "n", count: 5_000) + "'"
            #expect(try client.executeSQL("SELECT \(literal)", inDatabaseAtPath: "big.db").first?.columns == [literal])
            // Streamed: rows reach the handler batch by batch, while later statements are still to come.
            let batches = Locked<[String]>(["SELECT 1;\n", "SELECT 2;\nSELECT ", "3"])
            var seen: [Int64] = [], flushes = 0
            try client.executeSQL(inDatabaseAtPath: "big.db", reading: { batches.withLock { $0.isEmpty ? nil : Data($0.removeFirst().utf8) } },
                                  forEachRow: { if case .integer(let value) = $0.values.first { seen.append(value) } },
                                  afterRows: { flushes += 1 })
            #expect(seen == [1, 2, 3] && flushes >= 2)
            // Waiting for each piece (a terminal): the next read comes after the rows of the line before.
            let log = Locked<[String]>([]), lines = Locked(["SELECT 1;\n", "SELECT 'x', 2;\n", "SELECT\n", "3;\n"])
            try client.executeSQL(inDatabaseAtPath: "big.db", reading: {
                let line = lines.withLock { $0.isEmpty ? nil : $0.removeFirst() }
                log.withLock { $0.append("read " + (line ?? "end").trimmingCharacters(in: .newlines)) }
                return line.map { Data($0.utf8) }
            }, waitingForEachPiece: true, forEachRow: { row in log.withLock { $0.append("row " + String(decoding: row.listModeText, as: UTF8.self)) } })
            #expect(log.withLock { $0 } == ["read SELECT 1;", "row 1", "read SELECT 'x', 2;", "row x|2", "read SELECT", "read 3;", "row 3", "read end"])
            // A failure stops the script: rows before it arrive, nothing after it runs.
            var before: [SQLiteValue] = []
            batches.withLock { $0 = ["SELECT 7;\nSELEC 8;\nINSERT INTO t VALUES (0, 'not run');\n"] }
            do {
                try client.executeSQL(inDatabaseAtPath: "big.db", reading: { batches.withLock { $0.isEmpty ? nil : Data($0.removeFirst().utf8) } },
                                      forEachRow: { before += $0.values })
                Issue.record("no error")
            } catch let error as DataProtectionError {
                #expect(error.code == .sqliteError)
            }
            #expect(before == [.integer(7)])
            #expect(try client.executeSQL("SELECT count(*) FROM t WHERE id = 0", inDatabaseAtPath: "big.db").first?.values == [.integer(0)])
            // A source that fails: its error, and the statements it had not ended do not run.
            let sourceFailed = DataProtectionError(.ioFailure, "The statements could not be read.")
            let calls = Locked(0)
            do throws(DataProtectionError) {
                try client.executeSQL(inDatabaseAtPath: "big.db", reading: { () throws(DataProtectionError) -> Data? in
                    let call = calls.withLock { count in
                        count += 1
                        return count
                    }
                    guard call == 1 else { throw sourceFailed }
                    return Data("INSERT INTO t VALUES (-1, 'x');\nDELETE FROM t".utf8)
                }, forEachRow: { _ in })
                Issue.record("no error")
            } catch {
                #expect(error == sourceFailed, "\(error)")  // the source's own error, as it is
            }
            #expect(try client.executeSQL("SELECT count(*) FROM t", inDatabaseAtPath: "big.db").first?.values == [.integer(20_001)])
        }
    }

    @Test("the same code runs on the in-process store and on the agent (ProtectedFileSystem)")
    func sharedSurface() throws {
        func exercise(_ store: some ProtectedFileSystem) throws -> Data {
            try store.write(Data("abc".utf8), to: "s/f")
            let handle = try store.openFile(atPath: "s/f", mode: .append, create: false, protection: nil)
            try handle.write(contentsOf: Data("def".utf8))
            try handle.close()
            return try store.contents(atPath: "s/f")
        }
        try withAgent { agent in
            try agent.device.unlock(passcode: "1234")
            #expect(try exercise(agent.client()) == Data("abcdef".utf8))
            try agent.store.removeItem(atPath: "s/f")
            #expect(try exercise(agent.store) == Data("abcdef".utf8))
        }
    }
}

/// A value behind a lock, for tests that collect from many threads.
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

/// Finding a store's agent from Swift, as dpctl finds it.
@Suite("Agent for a store")
struct AgentForStoreTests {
    @Test("AgentStore(forStoreAt:) reaches the agent at the store's socket, DPCTL_AGENT_SOCKET included, or says there is none")
    func findsTheAgentOfAStore() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("agent-for-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let data = root.appendingPathComponent("data")
        let deviceDirectory = root.appendingPathComponent("device")
        let runtime = root.appendingPathComponent("run")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let store = try ProtectedStore(creatingAt: data, deviceDirectory: deviceDirectory, passcode: "1234",
                                       configuration: DeviceConfiguration(passcodeCost: .minimal))
        let environment = ["XDG_RUNTIME_DIR": runtime.path]

        do {
            _ = try AgentStore(forStoreAt: data, deviceDirectory: deviceDirectory, environment: environment)
            Issue.record("connected with no agent running")
        } catch {
            #expect(error.code == .fileNotFound)
            #expect(error.hint?.contains("dpctl agent start") == true, "\(error)")
        }
        do {
            _ = try AgentSocketLocation.path(forStoreAt: root.appendingPathComponent("nothing"), environment: environment)
            Issue.record("a socket for no store")
        } catch {
            #expect(error.code == .fileNotFound)
        }

        let socket = try AgentSocketLocation.path(forStoreAt: data, deviceDirectory: deviceDirectory, environment: environment)
        #expect(socket.hasPrefix(runtime.path + "/dpctl/"))
        let server = try AgentServer(store: store, socketPath: socket)
        Thread.detachNewThread { server.run() }
        defer {
            server.stop()
            while FileManager.default.fileExists(atPath: socket) { Thread.sleep(forTimeInterval: 0.01) }
        }
        let client = try AgentStore(forStoreAt: data, deviceDirectory: deviceDirectory, environment: environment)
        #expect(client.socketPath == socket)
        #expect(try client.status().state == .booted)

        let elsewhere = try AgentStore(forStoreAt: root.appendingPathComponent("nothing"),
                                       environment: environment.merging(["DPCTL_AGENT_SOCKET": socket]) { $1 })
        #expect(elsewhere.agentProcessIdentifier == getpid())
    }
}
