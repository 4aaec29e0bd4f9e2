import DataProtection
import DataProtectionSQLite
@testable import DataProtectionAgent
import DataProtectionFuzzing
import Foundation
import SocketBridge
import SystemPackage
import Testing

/// The wire format (`Keys/agent-protocol.md`): known-answer frames, round trips, and what
/// the agent does with frames that break the protocol.
@Suite("Agent protocol")
struct AgentProtocolTests {
    static let vectors: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Keys/vectors/agent-protocol.json")

    struct Vectors: Decodable {
        struct Vector: Decodable {
            var name: String
            var frame: String
        }
        var requests: [Vector]
        var responses: [Vector]
    }

    /// The values of the vectors, by name.
    static let requests: [String: AgentRequest] = [
        "hello, protocol version 1": .hello(version: 1),
        "hello, protocol version 2": .hello(version: 2),
        "status": .status,
        "unlock with passcode \"1234\"": .unlock(passcode: Passcode("1234")),
        "bare unlock (no passcode)": .unlock(passcode: nil),
        "lock": .lock,
        "readFile \"a.txt\"": .readFile(path: "a.txt"),
        "writeFile \"a.txt\", class complete, not exclusive, inline \"hi\"":
            .writeFile(path: "a.txt", protection: .complete, exclusive: false, source: .inline(Data("hi".utf8))),
        "writeFile \"big\", no class given, exclusive, pieces through the passed descriptor":
            .writeFile(path: "big", protection: nil, exclusive: true, source: .pieces),
        "open \"a.txt\" for update, create, class none": .open(path: "a.txt", mode: .update, create: true, protection: ProtectionClass.none),
        "read 4096 bytes from handle 1 at its offset": .read(handle: 1, offset: nil, count: 4096),
        "write \"x\" to handle 1 at offset 10": .write(handle: 1, offset: 10, data: Data("x".utf8)),
        "setProtection \"docs\" to completeUnlessOpen": .setProtection(path: "docs", protection: .completeUnlessOpen),
        "changePasscode from \"1234\" to \"5678\"": .changePasscode(from: Passcode("1234"), to: Passcode("5678")),
        "watch": .watch,
        "sqlStream \"db\", create, class complete, stopping at a failed statement":
            .sqlStream(path: "db", create: true, protection: .complete, keepGoing: false),
        "sqlStream \"log.db\", no create, no class given, going on after a failed statement":
            .sqlStream(path: "log.db", create: false, protection: nil, keepGoing: true),
        "backupCreate to two X25519 recipients, with items":
            .backupCreate(recipients: ["age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p",
                                       "age1lggyhqrw2nlhcxprm67z43rta597azn8gknawjehu9d9dl0jq3yqqvfafg"],
                          passphrase: nil, workFactor: 0, items: true),
        "backupCreate to the passphrase \"correct horse\", work factor 18, without items":
            .backupCreate(recipients: [], passphrase: Passcode("correct horse"), workFactor: 18, items: false),
    ]

    static let responses: [String: AgentResponse] = [
        "ok, no fields": .ok([]),
        "failure protectedDataUnavailable \"locked\", no hint, no retry, no SQLite code":
            .failure(DataProtectionError(.protectedDataUnavailable, "locked")),
        "failure passcodeAttemptsDelayed \"wait\", hint \"later\", retry after 60000 ms":
            .failure(DataProtectionError(.passcodeAttemptsDelayed, "wait", hint: "later", retryAfter: .seconds(60))),
        "descriptorNeeded, 2 MiB": .descriptorNeeded(size: 2 << 20),
        "event protectedDataWillBecomeUnavailable at 1700000000.5 s":
            .event(AgentEvent(notification: .protectedDataWillBecomeUnavailable, nanosecondsSince1970: 1_700_000_000_500_000_000)),
    ]

    static func frame(_ payload: [UInt8]) -> [UInt8] {
        withUnsafeBytes(of: UInt32(payload.count).bigEndian) { Array($0) } + payload
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func payload(ofHexFrame hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return Array(bytes.dropFirst(4))
    }

    @Test("every known-answer frame encodes and decodes exactly")
    func knownAnswers() throws {
        let vectors = try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: Self.vectors))
        #expect(vectors.requests.count == Self.requests.count)
        #expect(vectors.responses.count == Self.responses.count)
        for vector in vectors.requests {
            let value = try #require(Self.requests[vector.name], "no value for \(vector.name)")
            #expect(Self.hex(Self.frame(value.encoded())) == vector.frame, "\(vector.name)")
            #expect(try AgentRequest.decode(Self.payload(ofHexFrame: vector.frame)) == value, "\(vector.name)")
        }
        for vector in vectors.responses {
            let value = try #require(Self.responses[vector.name], "no value for \(vector.name)")
            #expect(Self.hex(Self.frame(value.encoded())) == vector.frame, "\(vector.name)")
            #expect(try AgentResponse.decode(Self.payload(ofHexFrame: vector.frame)) == value, "\(vector.name)")
        }
    }

    @Test("every cut of a request payload is refused, never misread")
    func truncatedRequests() {
        for request in Self.requests.values {
            let payload = request.encoded()
            for length in 0..<payload.count {
                #expect(throws: AgentProtocolViolation.self) { try AgentRequest.decode(Array(payload.prefix(length))) }
            }
            #expect(throws: AgentProtocolViolation.self) { try AgentRequest.decode(payload + [0]) }
        }
    }

    @Test("passcodes cross as bytes: not UTF-8 (refused as a string before), empty, 4096 bytes; 4097 is a violation")
    func passcodeBytes() throws {
        for bytes in [[0xFF, 0xFE, 0x80, 0x00], [], [UInt8](repeating: 0x31, count: 4096)] as [[UInt8]] {
            let passcode = Passcode(bytes: bytes)
            for request in [AgentRequest.unlock(passcode: passcode), .setPasscode(passcode), .removePasscode(passcode),
                            .changePasscode(from: passcode, to: Passcode("new"))] {
                #expect(try AgentRequest.decode(request.encoded()) == request, "\(bytes.count) bytes")
            }
        }
        let tooLong = AgentRequest.setPasscode(Passcode(bytes: [UInt8](repeating: 0x31, count: 4097))).encoded()
        #expect(throws: AgentProtocolViolation.self) { try AgentRequest.decode(tooLong) }
    }

    @Test("status, attribute and SQL replies survive a round trip")
    func replies() throws {
        let rows = [SQLiteRow(values: [.integer(-1), .real(1e20), .text("ü"), .blob(Data([1, 2])), .null],
                              texts: ["-1", "1.0e+20", "ü", nil, nil], columns: ["a", "b", "c", "d", "e"])]
        #expect(try AgentSQLRows.decode(AgentSQLRows.encode(rows)) == rows)
        #expect(try AgentRequest.decode(AgentRequest.sql(path: "db", create: true, protection: nil, statements: "select 1").encoded())
                == .sql(path: "db", create: true, protection: nil, statements: "select 1"))
        let status = AgentStatus(state: .locked, passcodeSet: true, failedPasscodeAttempts: 3, nextAttemptAllowedIn: .seconds(60),
                                 autoLock: .seconds(300), autoLockIn: nil, keyDiscardIn: .milliseconds(9_500),
                                 availableClasses: [.completeUntilFirstUserAuthentication, .none], agentProcessIdentifier: 4242)
        #expect(try AgentStatus.decode(status.encoded()) == status)
        let attributes = ProtectedItemAttributes(type: .file, size: 12, protectionClass: .complete,
                                                 creationDate: Date(timeIntervalSince1970: 1_700_000_000), modificationDate: nil)
        #expect(try ProtectedItemAttributes.decode(attributes.encoded()) == attributes)
        #expect(try AgentReply.names(AgentReply.names(["a", "ü", ""])) == ["a", "ü", ""])
    }

    /// Connects, says hello (in protocol `version`), and returns the socket.
    static func rawConnection(_ agent: AgentFixture, hello: Bool = true, version: UInt32 = AgentWireFormat.version) throws -> UnixSocket {
        let socket = try UnixSocket.connect(to: agent.socketPath)
        if hello {
            try socket.send(frame(AgentRequest.hello(version: version).encoded()))
            var reply = [UInt8](repeating: 0, count: 13)
            var filled = 0
            while filled < reply.count {
                let count = try socket.receive(into: &reply, from: filled).count
                guard count > 0 else { break }
                filled += count
            }
            #expect(Array(reply.prefix(5)) == [0, 0, 0, 9, 0])
        }
        return socket
    }

    /// Whether the agent closed `socket` (end of stream, or a reset when it left bytes unread,
    /// within a few seconds; nothing else sent).
    static func closedByAgent(_ socket: UnixSocket) throws -> Bool {
        var buffer = [UInt8](repeating: 0, count: 64)
        guard try socket.waitUntilReadable(milliseconds: 5000) else { return false }
        let result: Result<Int, SocketError> = Result { () throws(SocketError) in try socket.receive(into: &buffer).count }
        switch result {
        case .success(let count): return count == 0
        case .failure(let error): return error.errno == ECONNRESET
        }
    }

    @Test("a frame that breaks the protocol closes that client only", arguments: [
        ("a length beyond the limit", [UInt8]([0xff, 0xff, 0xff, 0xff, 1])),
        ("an empty frame", [0, 0, 0, 0]),
        ("an unknown operation", [0, 0, 0, 1, 0xee]),
        ("a field past the end", [0, 0, 0, 3, 5, 0, 0]),
        ("trailing bytes", [0, 0, 0, 3, 2, 0, 0]),
        ("a path that is not UTF-8", [0, 0, 0, 7, 5, 0, 0, 0, 2, 0xc3, 0x28]),
        ("a second hello", [0, 0, 0, 5, 1, 0, 0, 0, 1]),
    ])
    func malformedFrames(_ name: String, _ bytes: [UInt8]) throws {
        try withAgent { agent in
            let bystander = try agent.client()
            try bystander.device.unlock(passcode: "1234")
            let socket = try Self.rawConnection(agent)
            try socket.send(bytes)
            if name == "a second hello" {
                // Not a violation of the framing: a failure answer, and the connection stays.
                var reply = [UInt8](repeating: 0, count: 5)
                _ = try socket.receive(into: &reply)
                #expect(reply[4] == 1)
            } else {
                #expect(try Self.closedByAgent(socket), "\(name)")
            }
            try bystander.write(Data("still served".utf8), to: "after")
            #expect(try bystander.contents(atPath: "after") == Data("still served".utf8))
        }
    }

    @Test("a first frame that is not hello, or a hello of another version, ends the connection")
    func helloFirst() throws {
        try withAgent { agent in
            let noHello = try Self.rawConnection(agent, hello: false)
            try noHello.send(Self.frame(AgentRequest.status.encoded()))
            #expect(try Self.closedByAgent(noHello))
            let otherVersion = try Self.rawConnection(agent, hello: false)
            try otherVersion.send(Self.frame(AgentRequest.hello(version: 99).encoded()))
            var buffer = [UInt8](repeating: 0, count: 512)
            let count = try otherVersion.receive(into: &buffer).count
            guard case .failure(let error) = try AgentResponse.decode(Array(buffer[4..<count])) else {
                Issue.record("no failure for version 99")
                return
            }
            #expect(error.code == .invalidArgument && error.message.contains("versions 1 and 2"), "\(error.message)")
            #expect(try Self.closedByAgent(otherVersion))
        }
    }

    @Test("a version-1 client is served as before; sqlStream on its connection is a violation")
    func versionOne() throws {
        try withAgent { agent in
            let old = try Self.rawConnection(agent, version: 1)
            try old.send(Self.frame(AgentRequest.status.encoded()))
            #expect(try Self.response(on: old).isOK)
            let (mine, theirs) = try UnixSocket.pair()
            defer { mine.close() }
            try old.send(Self.frame(AgentRequest.sqlStream(path: "db", create: true, protection: nil, keepGoing: false).encoded()), passing: theirs.descriptor)
            theirs.close()
            #expect(try Self.closedByAgent(old))
            #expect(!agent.store.fileExists(atPath: "db"))
        }
    }

    @Test("sqlStream: statements in pieces ending anywhere; a stream cut without its end marker runs nothing more; the agent stops while one waits")
    func sqlStreamPieces() throws {
        try withAgent { agent in
            try agent.device.unlock(passcode: "1234")
            /// Sends `pieces` (then the end marker if `ended`) on a stream and returns the rows' first values and the response.
            func stream(_ pieces: [String], ended: Bool, keepGoing: Bool = false) throws
                -> (values: [SQLiteValue], response: AgentResponse, sizes: [(bytes: Int, rows: Int)], acknowledgments: Int, failures: [DataProtectionError]) {
                let connection = try Self.rawConnection(agent)
                defer { connection.close() }
                let (mine, theirs) = try UnixSocket.pair()
                defer { mine.close() }
                try connection.send(Self.frame(AgentRequest.sqlStream(path: "s.db", create: true, protection: .complete, keepGoing: keepGoing).encoded()),
                                    passing: theirs.descriptor)
                theirs.close()
                for piece in pieces { try AgentPieceWriter.send(Array(piece.utf8), on: mine) }
                if ended { try AgentPieceWriter.send([UInt8](), on: mine) } else { mine.shutdownWriting() }
                var reader = AgentPieceReader(FileDescriptor(rawValue: mine.descriptor), limit: 1 << 24, describe: "rows")
                var values: [SQLiteValue] = [], sizes: [(bytes: Int, rows: Int)] = [], acknowledgments = 0, failures: [DataProtectionError] = []
                while let piece = try reader.next(cut: DataProtectionError(.ioFailure, "rows cut")) {
                    if piece.starts(with: AgentSQLRows.failureMark), case .failure(let error) = try AgentResponse.decode(Array(piece.dropFirst(4))) {
                        failures.append(error)
                        continue
                    }
                    let rows = try AgentSQLRows.decode(Array(piece), fieldLimit: piece.count)
                    if rows.isEmpty { acknowledgments += 1 }
                    values += rows.compactMap(\.values.first)
                    sizes.append((piece.count, rows.count))
                }
                return (values, try Self.response(on: connection), sizes, acknowledgments, failures)
            }
            let whole = try stream(["CREATE TABLE t(v);\nINSERT INTO t VALUES ('a;", "b');\nSELECT v FROM t;", "\nSELECT count(*) FROM t"], ended: true)
            #expect(whole.values == [.text("a;b"), .integer(1)])
            #expect(whole.response.isOK)
            #expect(whole.acknowledgments == 3)  // one per piece of statements, once what it completed has run
            // Going on after a failed statement: its error among the rows, the rest of its piece dropped, the next pieces run.
            let going = try stream(["SELECT 1;\n", "SELEC 2; SELECT 3;\n", "SELECT 4;\n"], ended: true, keepGoing: true)
            #expect(going.values == [.integer(1), .integer(4)])
            #expect(going.failures.map(\.code) == [.sqliteError] && going.response.isOK)
            let stopping = try stream(["SELECT 1;\n", "SELEC 2; SELECT 3;\n", "SELECT 4;\n"], ended: true)
            #expect(stopping.values == [.integer(1)] && stopping.failures.isEmpty)
            guard case .failure(let failed) = stopping.response else {
                Issue.record("no failure for a failed statement")
                return
            }
            #expect(failed.code == .sqliteError)
            // Pieces of rows: at most 1 MiB, or one row alone; 5 rows of 300 KB, then one of 2 MB.
            let large = try stream(["WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 5) SELECT zeroblob(300000) FROM c;",
                                    "SELECT zeroblob(2000000);"], ended: true)
            #expect(large.response.isOK && large.values.count == 6)
            #expect(large.sizes.allSatisfy { $0.bytes <= 1 << 20 || $0.rows == 1 }, "\(large.sizes)")
            #expect(large.sizes.map(\.rows).reduce(0, +) == 6 && large.sizes.count >= 3)
            // Cut: the complete statements ran, the last one (which the end marker would have run as it is) did not.
            let cut = try stream(["INSERT INTO t VALUES ('c');\nSELECT count(*) FROM t;\nDELETE FROM t"], ended: false)
            #expect(cut.values == [.integer(2)])
            guard case .failure(let error) = cut.response else {
                Issue.record("no failure for a cut stream")
                return
            }
            #expect(error.code == .ioFailure && error.message.contains("end marker"), "\(error.message)")
            let client = try agent.client()
            #expect(try client.executeSQL("SELECT count(*) FROM t", inDatabaseAtPath: "s.db").first?.values == [.integer(2)])
            // A stream waiting for its next statement does not hold the agent up when it stops.
            let connection = try Self.rawConnection(agent)
            defer { connection.close() }
            let (mine, theirs) = try UnixSocket.pair()
            defer { mine.close() }
            try connection.send(Self.frame(AgentRequest.sqlStream(path: "s.db", create: false, protection: nil, keepGoing: false).encoded()), passing: theirs.descriptor)
            theirs.close()
            try AgentPieceWriter.send(Array("SELECT 1;\n".utf8), on: mine)
            var reader = AgentPieceReader(FileDescriptor(rawValue: mine.descriptor), limit: 1 << 24, describe: "rows")
            #expect(try reader.next(cut: DataProtectionError(.ioFailure, "rows cut")) != nil)  // the row of SELECT 1
            #expect(try reader.next(cut: DataProtectionError(.ioFailure, "rows cut")).map(Array.init) == [0, 0, 0, 0])  // the piece's acknowledgment: it waits now
            let started = Date()
            agent.server.stop()
            // Stopping shuts the stream down: the rows end without their end marker, the connection closes.
            #expect(throws: DataProtectionError.self) { try reader.next(cut: DataProtectionError(.ioFailure, "rows cut")) }
            #expect(try Self.closedByAgent(connection))
            #expect(Date().timeIntervalSince(started) < 10)
        }
    }

    @Test("sqlStream: a client that reads none of its rows does not hold up the agent's stop")
    func sqlStreamUnreadRows() throws {
        let agent = try AgentFixture()
        try agent.device.unlock(passcode: "1234")
        let connection = try Self.rawConnection(agent)
        defer { connection.close() }
        let (mine, theirs) = try UnixSocket.pair()
        defer { mine.close() }
        try connection.send(Self.frame(AgentRequest.sqlStream(path: "u.db", create: true, protection: nil, keepGoing: false).encoded()),
                            passing: theirs.descriptor)
        theirs.close()
        // Some 100 MB of rows, far more than the socket holds: the agent blocks sending them.
        try AgentPieceWriter.send(Array("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 1000) SELECT zeroblob(100000) FROM c;\n".utf8), on: mine)
        try AgentPieceWriter.send([UInt8](), on: mine)
        Thread.sleep(forTimeInterval: 0.5)
        let started = Date()
        agent.tearDown()  // stops the agent and waits for its sessions (30 s at most)
        #expect(Date().timeIntervalSince(started) < 10)
    }

    /// Reads one response frame.
    static func response(on socket: UnixSocket) throws -> AgentResponse {
        guard let (payload, _) = try AgentChannel(socket).receive() else { throw AgentProtocolViolation("the agent closed the connection") }
        return try AgentResponse.decode(payload)
    }

    @Test("a descriptor sent with an operation that takes none ends the connection, and is not kept")
    func strayDescriptor() throws {
        try withAgent { agent in
            let socket = try Self.rawConnection(agent)
            let (mine, theirs) = try UnixSocket.pair()
            try socket.send(Self.frame(AgentRequest.status.encoded()), passing: theirs.descriptor)
            theirs.close()
            #expect(try Self.closedByAgent(socket))
            // The agent closed its copy: the pair's other end sees end of stream.
            var buffer = [UInt8](repeating: 0, count: 8)
            #expect(try mine.waitUntilReadable(milliseconds: 5000))
            #expect(try mine.receive(into: &buffer).count == 0)
        }
    }

    @Test("the fuzz entry point survives its corpus and random streams")
    func fuzzEntry() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let count = Int.random(in: 0..<200, using: &generator)
            FuzzTarget.agentFrames.run(Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }))
        }
    }
}

extension AgentResponse {
    /// Whether it is `ok`.
    var isOK: Bool {
        if case .ok = self { return true }
        return false
    }
}

// MARK: - What agent-protocol.md states about descriptors, UTF-8, pieces and acknowledgments

extension AgentProtocolTests {
    @Test("a request whose descriptor is required, sent without one: invalidArgument, nothing done, the connection goes on")
    func requiredDescriptorMissing() throws {
        try withAgent { agent in
            try agent.device.unlock(passcode: "1234")
            let socket = try Self.rawConnection(agent)
            defer { socket.close() }
            for request in [AgentRequest.writeFile(path: "piecewise", protection: nil, exclusive: false, source: .pieces),
                            .writeFile(path: "raw", protection: nil, exclusive: false, source: .descriptor),
                            .sqlStream(path: "s.db", create: true, protection: nil, keepGoing: false)] {
                try socket.send(Self.frame(request.encoded()))
                guard case .failure(let error) = try Self.response(on: socket) else {
                    Issue.record("no failure for \(request)")
                    continue
                }
                #expect(error.code == .invalidArgument, "\(error)")
                try socket.send(Self.frame(AgentRequest.status.encoded()))
                #expect(try Self.response(on: socket).isOK, "the connection goes on after \(request)")
            }
            #expect(try agent.store.contentsOfDirectory(atPath: "/").isEmpty, "nothing written, no database opened")
        }
    }

    @Test("statements that are not UTF-8: a violation in sql; in sqlStream invalidArgument, even with keep going, after the batches before")
    func statementsNotUTF8() throws {
        try withAgent { agent in
            try agent.device.unlock(passcode: "1234")
            // sql: the statements are a field of the frame.
            let socket = try Self.rawConnection(agent)
            defer { socket.close() }
            var payload: [UInt8] = [30, 0, 0, 0, 4] + Array("x.db".utf8) + [1, 0]
            let statements: [UInt8] = Array("CREATE TABLE t(v);".utf8) + [0xFF]
            payload += withUnsafeBytes(of: UInt32(statements.count).bigEndian) { Array($0) } + statements
            try socket.send(Self.frame(payload))
            #expect(try Self.closedByAgent(socket))
            #expect(!agent.store.fileExists(atPath: "x.db"))
            // sqlStream: the first piece's batch runs and is acknowledged; the second fails, unacknowledged; the third is not read.
            let pieces = [Array("CREATE TABLE u(v);\n".utf8), Array("INSERT INTO u VALUES ('".utf8) + [0xFF] + Array("');\n".utf8),
                          Array("CREATE TABLE w(v);\n".utf8)]
            let (events, response) = try Self.stream(agent, pieces: pieces, keepGoing: true)
            #expect(events == ["ack", "end"])
            guard case .failure(let error) = response else {
                Issue.record("no failure for statements that are not UTF-8")
                return
            }
            #expect(error.code == .invalidArgument && error.message.contains("UTF-8"), "\(error)")
            let client = try agent.client()
            #expect(try client.executeSQL("SELECT count(*) FROM u", inDatabaseAtPath: "s.db").first?.values == [.integer(0)])
            expectCode(.sqliteError) { _ = try client.executeSQL("SELECT count(*) FROM w", inDatabaseAtPath: "s.db") }
        }
    }

    @Test("sqlStream: one acknowledgment per piece, also for a piece that completes nothing, after that piece's rows; none for the end marker")
    func acknowledgmentPerPiece() throws {
        try withAgent { agent in
            try agent.device.unlock(passcode: "1234")
            let (events, response) = try Self.stream(agent, pieces: ["SELECT", " 1;\n", "SELECT 2;\nSELECT 3;\n"].map { Array($0.utf8) })
            #expect(events == ["ack", "1", "ack", "2", "3", "ack", "end"])
            #expect(response.isOK)
        }
    }

    @Test("sqlStream: a piece's length is big-endian (the bytes of 10 little-endian announce 160 MiB: invalidArgument)")
    func pieceLengthBigEndian() throws {
        try withAgent { agent in
            try agent.device.unlock(passcode: "1234")
            let littleEndian: [UInt8] = withUnsafeBytes(of: UInt32(10).littleEndian) { Array($0) } + Array("SELECT 1;\n".utf8)
            let (events, response) = try Self.stream(agent, raw: littleEndian + [0, 0, 0, 0])
            #expect(events == ["end"])
            guard case .failure(let error) = response else {
                Issue.record("a little-endian length was accepted")
                return
            }
            #expect(error.code == .invalidArgument && error.message.contains("167772160"), "\(error)")
            let (good, ok) = try Self.stream(agent, raw: [0, 0, 0, 10] + Array("SELECT 1;\n".utf8) + [0, 0, 0, 0])
            #expect(good == ["1", "ack", "end"] && ok.isOK)
        }
    }

    /// Runs a `sqlStream` with `pieces` then the end marker (or the bytes `raw` as they are) and
    /// returns what came back on the rows channel, in order (`ack`, each row's first value,
    /// `failure <code>`, `end` for the end marker, `cut` for an end without it), and the response.
    static func stream(_ agent: AgentFixture, pieces: [[UInt8]] = [], raw: [UInt8]? = nil, keepGoing: Bool = false) throws
        -> (events: [String], response: AgentResponse) {
        let connection = try rawConnection(agent)
        defer { connection.close() }
        let (mine, theirs) = try UnixSocket.pair()
        defer { mine.close() }
        try connection.send(frame(AgentRequest.sqlStream(path: "s.db", create: true, protection: nil, keepGoing: keepGoing).encoded()),
                            passing: theirs.descriptor)
        theirs.close()
        if let raw {
            try mine.send(raw)
        } else {
            for piece in pieces { try AgentPieceWriter.send(piece, on: mine) }
            try AgentPieceWriter.end(on: mine)
        }
        var reader = AgentPieceReader(FileDescriptor(rawValue: mine.descriptor), limit: 1 << 24, describe: "rows")
        var events: [String] = []
        while true {
            let piece: ArraySlice<UInt8>?
            do {
                piece = try reader.next(cut: DataProtectionError(.ioFailure, "cut"))
            } catch {
                events.append("cut")
                break
            }
            guard let piece else {
                events.append("end")
                break
            }
            if piece.starts(with: AgentSQLRows.failureMark), case .failure(let error) = try AgentResponse.decode(Array(piece.dropFirst(4))) {
                events.append("failure \(error.code.rawValue)")
                continue
            }
            let rows = try AgentSQLRows.decode(Array(piece), fieldLimit: piece.count)
            if rows.isEmpty { events.append("ack") }
            for row in rows {
                if case .integer(let value) = row.values.first { events.append("\(value)") } else { events.append("row") }
            }
        }
        return (events, try response(on: connection))
    }
}
