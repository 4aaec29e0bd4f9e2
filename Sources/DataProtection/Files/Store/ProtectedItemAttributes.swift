import Foundation

/// What ``ProtectedStore/attributesOfItem(atPath:)`` reports.
public struct ProtectedItemAttributes: Sendable, Hashable {
    /// File or directory.
    public enum ItemType: String, Sendable, Hashable {
        case file
        case directory
    }

    /// File or directory.
    public var type: ItemType
    /// The plaintext size in bytes (0 for a directory).
    public var size: UInt64
    /// The file's class; for a directory, the class new entries take (`nil`: none was given).
    public var protectionClass: ProtectionClass?
    /// When the file was created (`nil` for a directory).
    public var creationDate: Date?
    /// When the item last changed on disk.
    public var modificationDate: Date?

    /// Attributes as given (an agent client rebuilds them from the wire).
    public init(type: ItemType, size: UInt64, protectionClass: ProtectionClass?, creationDate: Date?, modificationDate: Date?) {
        self.type = type
        self.size = size
        self.protectionClass = protectionClass
        self.creationDate = creationDate
        self.modificationDate = modificationDate
    }

    /// The same, keyed as `FileManager.attributesOfItem(atPath:)` keys them.
    public var dictionary: [FileAttributeKey: Any] {
        var result: [FileAttributeKey: Any] = [
            .type: type == .file ? FileAttributeType.typeRegular : FileAttributeType.typeDirectory,
            .size: NSNumber(value: size),
        ]
        if let protectionClass { result[.protectionKey] = protectionClass.fileProtectionType }
        if let creationDate { result[.creationDate] = creationDate }
        if let modificationDate { result[.modificationDate] = modificationDate }
        return result
    }
}

extension ProtectionClass {
    /// The class named by `Data.WritingOptions` file-protection options, if any.
    public init?(writingOptions options: Data.WritingOptions) {
        let mask = options.intersection(.fileProtectionMask)
        if mask.isEmpty { return nil }
        if mask == .completeFileProtection {
            self = .complete
        } else if mask == .completeFileProtectionUnlessOpen {
            self = .completeUnlessOpen
        } else if mask == .completeFileProtectionUntilFirstUserAuthentication {
            self = .completeUntilFirstUserAuthentication
        } else if mask == .noFileProtection {
            self = .none
        } else {
            return nil
        }
    }
}
