import Foundation

extension ProtectedStore {
    /// Creates a directory as `FileManager.createDirectory(atPath:withIntermediateDirectories:attributes:)`
    /// does: `attributes` may give the directory's class as `FileAttributeKey.protectionKey`
    /// (a `FileProtectionType`, or its raw value), the default for what is created inside.
    ///
    /// - Throws: ``DataProtectionError/Code/invalidArgument`` for any other attribute or an
    ///   unknown protection type; then the errors of ``createDirectory(atPath:withIntermediateDirectories:protection:)``.
    public func createDirectory(
        atPath path: String, withIntermediateDirectories: Bool = true, attributes: [FileAttributeKey: Any]?
    ) throws(DataProtectionError) {
        var protection = ProtectionChoice.inherited
        for (key, value) in attributes ?? [:] {
            guard key == .protectionKey else {
                throw .invalidArgument("Only the protection attribute can be given to a new directory (not \(key.rawValue)).")
            }
            let type = (value as? FileProtectionType) ?? (value as? String).map { FileProtectionType(rawValue: $0) }
            guard let type, let protectionClass = ProtectionClass(type) else {
                throw .invalidArgument("Unknown protection type \(value).")
            }
            protection = ProtectionChoice(protectionClass)
        }
        try createDirectory(atPath: path, withIntermediateDirectories: withIntermediateDirectories, protection: protection)
    }
}
