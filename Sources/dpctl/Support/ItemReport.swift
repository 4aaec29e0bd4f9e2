import ArgumentParser
import DataProtection
import Foundation

/// One item as `ls --json` and `stat --json` print it.
struct ItemReport: Encodable {
    var name: String?
    var path: String?
    var type: String
    var size: UInt64
    var protectionClass: String?
    var creationDate: Date?
    var modificationDate: Date?

    init(name: String? = nil, path: String? = nil, _ attributes: ProtectedItemAttributes) {
        self.name = name
        self.path = path
        type = attributes.type.rawValue
        size = attributes.size
        protectionClass = attributes.protectionClass?.rawValue
        creationDate = attributes.creationDate
        modificationDate = attributes.modificationDate
    }
}
