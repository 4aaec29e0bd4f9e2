import Foundation
import SodiumBridge

/// How ``ProtectedStore/encode(_:to:format:protection:)`` serialises a value.
public enum ProtectedCodingFormat: Sendable, Hashable {
    /// JSON (`JSONEncoder`/`JSONDecoder`).
    case json
    /// A binary property list (`PropertyListEncoder`/`PropertyListDecoder`).
    case propertyList
}

extension ProtectedStore {
    /// Encodes `value` and writes it atomically to `path`, like `write(_:to:protection:options:)`.
    public func encode<T: Encodable>(
        _ value: T, to path: String, format: ProtectedCodingFormat = .json, protection: ProtectionChoice = .inherited
    ) throws(DataProtectionError) {
        var data: Data
        do {
            switch format {
            case .json:
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                data = try encoder.encode(value)
            case .propertyList:
                let encoder = PropertyListEncoder()
                encoder.outputFormat = .binary
                data = try encoder.encode(value)
            }
        } catch {
            throw .invalidArgument("Could not encode a \(T.self): \(error).")
        }
        // The encoded plaintext is ours: wiped once written (what the encoder kept on the way is Foundation's).
        defer { Memory.wipe(&data) }
        try write(data, to: path, protection: protection)
    }

    /// Reads the file at `path` and decodes a `T` from it.
    public func decode<T: Decodable>(
        _ type: T.Type, from path: String, format: ProtectedCodingFormat = .json
    ) throws(DataProtectionError) -> T {
        var data = try contents(atPath: path)
        defer { Memory.wipe(&data) }  // the file's plaintext, ours; the decoded value is the caller's
        do {
            switch format {
            case .json: return try JSONDecoder().decode(type, from: data)
            case .propertyList: return try PropertyListDecoder().decode(type, from: data)
            }
        } catch {
            throw .invalidArgument("\(path) does not hold a \(T.self) in \(format): \(error).")
        }
    }
}
