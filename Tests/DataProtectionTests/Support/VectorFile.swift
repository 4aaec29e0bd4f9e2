import Foundation

/// One known-answer vector of `Keys/vectors` in the CCTV style (format: `Keys/README.md`):
/// `key: value` lines, an empty line, then the payload bytes.
struct VectorFile {
    struct FormatError: Error, CustomStringConvertible {
        let description: String
    }

    /// The path relative to ``folder`` (`wrong_passcode`, `attempts/zero`, `files/empty`).
    let name: String
    let fields: [String: String]
    let payload: Data

    /// `Keys/vectors`, found by walking up from this file to the package root.
    static let folder: URL = {
        var directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while directory.path != "/" {
            if FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path) {
                return directory.appendingPathComponent("Keys/vectors", isDirectory: true)
            }
            directory.deleteLastPathComponent()
        }
        return URL(fileURLWithPath: "/nonexistent/Keys/vectors")
    }()

    /// The vectors of `subfolder` (`""` for the top level): regular files whose names
    /// have no `.` (so generators and notes are skipped), sorted, as paths relative to ``folder``.
    static func names(in subfolder: String) -> [String] {
        let directory = subfolder.isEmpty ? folder : folder.appendingPathComponent(subfolder, isDirectory: true)
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return entries.filter { entry in
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: directory.appendingPathComponent(entry).path, isDirectory: &isDirectory)
            return exists && !isDirectory.boolValue && !entry.contains(".")
        }.sorted().map { subfolder.isEmpty ? $0 : subfolder + "/" + $0 }
    }

    init(_ name: String) throws {
        self.name = name
        let contents = try Data(contentsOf: Self.folder.appendingPathComponent(name))
        guard let end = contents.range(of: Data("\n\n".utf8)) else {
            throw FormatError(description: "\(name): no empty line ends the header")
        }
        guard let header = String(data: contents[..<end.lowerBound], encoding: .utf8) else {
            throw FormatError(description: "\(name): the header is not UTF-8")
        }
        var fields: [String: String] = [:]
        for line in header.split(separator: "\n", omittingEmptySubsequences: false) {
            guard let colon = line.firstIndex(of: ":") else {
                throw FormatError(description: "\(name): header line without a colon: \(line)")
            }
            let key = String(line[..<colon])
            guard fields[key] == nil else { throw FormatError(description: "\(name): field \(key) appears twice") }
            fields[key] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        self.fields = fields
        self.payload = Data(contents[end.upperBound...])
    }

    func field(_ key: String) throws -> String {
        guard let value = fields[key] else { throw FormatError(description: "\(name): no \(key) field") }
        return value
    }

    /// A field holding lowercase hexadecimal.
    func hex(_ key: String) throws -> Data {
        do {
            return try Self.data(hex: try field(key))
        } catch let error as FormatError {
            throw FormatError(description: "\(name): \(key): \(error.description)")
        }
    }

    /// Lowercase hexadecimal to bytes.
    static func data(hex: String) throws -> Data {
        let digits = Array(hex.utf8)
        guard digits.count.isMultiple(of: 2) else { throw FormatError(description: "odd-length hex: \(hex)") }
        var data = Data(capacity: digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else {
                throw FormatError(description: "not lowercase hex: \(hex)")
            }
            data.append(high << 4 | low)
        }
        return data
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
