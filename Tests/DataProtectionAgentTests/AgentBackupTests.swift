import DataProtection
import DataProtectionAgent
import DataProtectionBackup
import DataProtectionSQLite
import Foundation
import SodiumBridge
import SystemPackage
import Testing

/// Backups made by the agent (`backupCreate`, `Keys/backup-format.md` §6): one instant of
/// the whole store while other clients write, checked with the real `age`, `tar` and `sqlite3`.
@Suite("Agent: backups at one instant")
struct AgentBackupTests {
    /// What one archive holds, from the real tools.
    struct Extracted {
        let a: Int
        let b: Int
        let integrity: String
        let rows: (count: Int, min: Int, max: Int)
    }

    @Test("while one client writes a pair of files in lockstep and another commits to a WAL database, every agent-side backup holds one instant: the pair as written, the database a gap-free committed prefix that sqlite3 accepts")
    func oneInstantWhileOthersWrite() throws {
        try withAgent { agent in
            try agent.device.unlock(passcode: "1234")
            let setup = try agent.client()
            try setup.createDirectory(atPath: "pair", protection: .complete)
            try setup.write(Data("0".utf8), to: "pair/a")
            // Between "a" and "b" in the archive's order: a client-side backup reads "b" well after "a".
            try setup.write(Data(repeating: 7, count: 8 << 20), to: "pair/a-filler")
            try setup.write(Data("0".utf8), to: "pair/b")
            _ = try setup.executeSQL("PRAGMA journal_mode = WAL; CREATE TABLE counter(n INTEGER PRIMARY KEY);",
                                     inDatabaseAtPath: "db/counter.db", create: true, protection: .completeUnlessOpen)

            let stop = Locked(false)
            let writers = DispatchGroup()
            let failures = Locked<[String]>([])
            // The pair: "a" then "b", each with the round's number; at every instant a == b or a == b + 1.
            let pairClient = try agent.client()
            DispatchQueue.global().async(group: writers) {
                var round = 0
                while !stop.withLock({ $0 }) {
                    round += 1
                    do {
                        try pairClient.write(Data(String(round).utf8), to: "pair/a")
                        try pairClient.write(Data(String(round).utf8), to: "pair/b")
                    } catch {
                        failures.withLock { $0.append("pair: \(error)") }
                        return
                    }
                }
            }
            // The database: one connection kept open in the agent (a stream of statements), one commit per piece, no checkpoint.
            let sqlClient = try agent.client()
            let next = Locked(0)
            DispatchQueue.global().async(group: writers) {
                do {
                    try sqlClient.executeSQL(inDatabaseAtPath: "db/counter.db", reading: { () throws(DataProtectionError) -> Data? in
                        let row = next.withLock { value -> Int? in
                            if value == 0 { value = 1; return 0 }
                            if stop.withLock({ $0 }) { return nil }
                            value += 1
                            return value - 1
                        }
                        guard let row else { return nil }
                        return Data((row == 0 ? "PRAGMA wal_autocheckpoint = 0;\n" : "INSERT INTO counter VALUES (\(row));\n").utf8)
                    }, waitingForEachPiece: true, forEachRow: { _ in })
                } catch {
                    failures.withLock { $0.append("sql: \(error)") }
                }
            }

            let (identity, recipient) = try Self.ageKeygen(in: agent.root)
            let backupClient = try agent.client()
            var extracted: [Extracted] = []
            // Both writers under way.
            #expect(eventually { next.withLock { $0 } > 20 && ((try? backupClient.contents(atPath: "pair/b")) ?? Data("0".utf8)) != Data("0".utf8) })
            for round in 0..<6 {
                let archive = agent.root.appendingPathComponent("backup-\(round).age")
                let descriptor = try FileDescriptor.open(FilePath(archive.path), .writeOnly, options: [.create, .truncate], permissions: [.ownerReadWrite])
                let summary = try backupClient.createBackup(to: descriptor, recipients: [try AgeRecipient(recipient)], includingItems: false)
                try descriptor.close()
                #expect(summary.fileCount == 4)
                extracted.append(try Self.extract(archive, identity: identity, into: agent.root.appendingPathComponent("out-\(round)")))
            }
            stop.withLock { $0 = true }
            #expect(writers.wait(timeout: .now() + 30) == .success)
            #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")

            for (round, archive) in extracted.enumerated() {
                #expect(archive.a == archive.b || archive.a == archive.b + 1, "backup \(round): a = \(archive.a), b = \(archive.b): not one instant")
                #expect(archive.integrity == "ok", "backup \(round): \(archive.integrity)")
                #expect(archive.rows.count == archive.rows.max && (archive.rows.count == 0 || archive.rows.min == 1),
                        "backup \(round): \(archive.rows.count) rows from \(archive.rows.min) to \(archive.rows.max): not a gap-free prefix")
            }
            // The writers moved on between the backups: these are not all the same instant.
            #expect(Set(extracted.map(\.a)).count > 1)
            #expect(extracted.last!.rows.count > 0)
        }
    }

    @Test("a class that is not available fails the agent-side backup with protectedDataUnavailable, naming the file, and nothing is written")
    func lockedClassFails() throws {
        try withAgent { agent in
            try agent.device.unlock(passcode: "1234")
            let client = try agent.client()
            try client.write(Data("secret".utf8), to: "locked.txt", protection: .complete)
            try agent.device.lock()
            let (_, recipient) = try Self.ageKeygen(in: agent.root)
            let archive = agent.root.appendingPathComponent("locked.age")
            let descriptor = try FileDescriptor.open(FilePath(archive.path), .writeOnly, options: [.create, .truncate], permissions: [.ownerReadWrite])
            defer { try? descriptor.close() }
            do {
                try client.createBackup(to: descriptor, recipients: [try AgeRecipient(recipient)])
                Issue.record("the backup of a locked complete file succeeded")
            } catch let error as DataProtectionError {
                #expect(error.code == .protectedDataUnavailable)
                #expect(error.message.contains("locked.txt"))
            } catch {
                Issue.record("\(error)")
            }
            #expect(try FileManager.default.attributesOfItem(atPath: archive.path)[.size] as? UInt64 == 0)
        }
    }

    @Test("a passphrase archive made by the agent (the passphrase sent in a wiped frame, the key derived there) opens with that passphrase and holds the items; a passphrase with an X25519 recipient is refused")
    func passphrase() throws {
        try withAgent { agent in
            try agent.device.unlock(passcode: "1234")
            let client = try agent.client()
            try client.write(Data("hello".utf8), to: "docs/hello.txt", protection: .completeUntilFirstUserAuthentication)
            _ = try client.keychain.add(ItemSecret("s3cret"), label: "mail", attributes: ["service": "imap"], accessibility: .afterFirstUnlock)
            let archive = agent.root.appendingPathComponent("passphrase.age")
            let descriptor = try FileDescriptor.open(FilePath(archive.path), .writeOnly, options: [.create, .truncate], permissions: [.ownerReadWrite])
            let summary = try client.createBackup(to: descriptor, recipients: [try AgeRecipient(passphrase: Passcode("correct horse"), workFactor: 10)])
            try descriptor.close()
            #expect(summary.hasItems && summary.fileCount == 1 && summary.contentBytes == 5)
            #expect(try FileManager.default.attributesOfItem(atPath: archive.path)[.size] as? UInt64 == summary.archiveBytes)
            let input = try FileDescriptor.open(FilePath(archive.path), .readOnly)
            defer { try? input.close() }
            let listed = try Backup.verify(from: .fileDescriptor(input), identities: [AgeIdentity(passphrase: Passcode("correct horse"))])
            #expect(listed.recipientTypes == ["scrypt"])
            #expect(listed.entries.map(\.path) == ["docs", "docs/hello.txt", Backup.itemsEntryPath])

            let (_, recipient) = try Self.ageKeygen(in: agent.root)
            let refused = try FileDescriptor.open(FilePath(archive.path + ".2"), .writeOnly, options: [.create, .truncate], permissions: [.ownerReadWrite])
            defer { try? refused.close() }
            expectCode(.invalidArgument) {
                try client.createBackup(to: refused, recipients: [try AgeRecipient(recipient), try AgeRecipient(passphrase: Passcode("x"), workFactor: 10)])
            }
        }
    }

    // MARK: - The real tools

    static func ageKeygen(in root: URL) throws -> (identity: URL, recipient: String) {
        let file = root.appendingPathComponent("key-\(UUID().uuidString).txt")
        let result = try run("/usr/bin/age-keygen", ["-o", file.path])
        #expect(result.status == 0)
        return (file, result.error.split(separator: " ").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? "")
    }

    /// `age -d | tar -x` into `directory`, then the pair and what `sqlite3` says of the database.
    static func extract(_ archive: URL, identity: URL, into directory: URL) throws -> Extracted {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let tarFile = directory.appendingPathComponent("archive.tar")
        let decrypted = try run("/usr/bin/age", ["-d", "-i", identity.path, "-o", tarFile.path, archive.path])
        #expect(decrypted.status == 0, "\(decrypted.error)")
        let untarred = try run("/usr/bin/tar", ["-x", "-f", tarFile.path, "-C", directory.path])
        #expect(untarred.status == 0, "\(untarred.error)")
        let a = Int(try String(contentsOf: directory.appendingPathComponent("pair/a"), encoding: .utf8)) ?? -1
        let b = Int(try String(contentsOf: directory.appendingPathComponent("pair/b"), encoding: .utf8)) ?? -1
        let database = directory.appendingPathComponent("db/counter.db").path
        let integrity = try run("/usr/bin/sqlite3", [database, "PRAGMA integrity_check"])
        let counted = try run("/usr/bin/sqlite3", [database, "SELECT count(*), coalesce(min(n), 0), coalesce(max(n), 0) FROM counter"])
        let numbers = String(decoding: counted.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            .split(separator: "|").map { Int($0) ?? -1 }
        return Extracted(a: a, b: b, integrity: String(decoding: integrity.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                            + integrity.error,
                         rows: numbers.count == 3 ? (numbers[0], numbers[1], numbers[2]) : (-1, -1, -1))
    }

    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: Data, error: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe(), error = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = error
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let message = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, data, String(decoding: message, as: UTF8.self))
    }
}
