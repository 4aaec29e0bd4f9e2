import Foundation
import Testing
@testable import DataProtection
@testable import DataProtectionBackup

/// The backup vectors of `Keys/vectors/backup` (`Keys/backup-format.md` §8): each verified, and
/// restored into an empty store; a failing one leaves the store empty.
@Suite("Backups: known-answer vectors")
struct BackupVectorTests {
    static let folder: URL = {
        var directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while directory.path != "/" && !FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path) {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("Keys/vectors/backup")
    }()

    static let names: [String] = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { !$0.contains(".") }.sorted()

    /// The header fields and the archive.
    static func read(_ name: String) throws -> (fields: [String: String], archive: Data) {
        let contents = try Data(contentsOf: folder.appendingPathComponent(name))
        let end = try #require(contents.range(of: Data("\n\n".utf8)))
        var fields: [String: String] = [:]
        for line in String(decoding: contents[..<end.lowerBound], as: UTF8.self).split(separator: "\n") {
            let colon = try #require(line.firstIndex(of: ":"))
            fields[String(line[..<colon])] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (fields, Data(contents[end.upperBound...]))
    }

    @Test("there are vectors of both outcomes")
    func present() {
        #expect(Self.names.count >= 10, "\(Self.names)")
    }

    @Test("backup vector", arguments: names)
    func vector(name: String) throws {
        let (fields, archive) = try Self.read(name)
        var identities = try AgeIdentity.identities(inFile: Passcode(try #require(fields["identity"])))
        if let passphrase = fields["passphrase"] { identities = [AgeIdentity(passphrase: Passcode(passphrase))] }
        let expect = try #require(fields["expect"])
        try withScratch { root in
            let file = root.appendingPathComponent("archive.age")
            try archive.write(to: file)
            let target = try makeStore(in: root, name: "target")
            do {
                let (input, descriptor) = try fileInput(file)
                defer { try? descriptor.close() }
                let summary = try Backup.verify(from: input, identities: identities)
                let restored = try restore(file, into: target, identities: identities)
                #expect(expect == "success", "\(name) was accepted")
                let listed = summary.entries.map { "\($0.kind == .directory ? "d" : "-") \($0.protectionClass?.rawValue ?? "-") \($0.size) \($0.path)" }
                #expect(listed.joined(separator: "; ") == fields["entries"], "\(name)")
                #expect(restored.entries == summary.entries)
            } catch let error as DataProtectionError {
                #expect(error.code.rawValue == expect, "\(name): \(error)")
                #expect(try target.contentsOfDirectory(atPath: "/").isEmpty)
            }
        }
    }
}
