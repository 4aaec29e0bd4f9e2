import DataProtection
import DataProtectionSQLite
import Foundation
import SodiumBridge

extension AgentSession {
    /// Carries out a keychain request (codes 40-48) on the agent's store's keychain.
    func performItemRequest(_ request: AgentRequest) throws(DataProtectionError) -> AgentResponse {
        let keychain = server.keychain
        var writer = AgentFieldWriter()
        switch request {
        case .itemAdd(let label, let attributes, let accessibility, let replacing, let secret):
            defer { secret.wipe() }
            writer.item(try keychain.add(secret, label: label, attributes: attributes, accessibility: accessibility, replacing: replacing))
        case .itemSearch(let attributes, let accessibilities):
            let search = try keychain.items(matching: attributes, accessibilities: accessibilities)
            writer.items(search.items)
            writer.accessibilities(search.lockedAccessibilities)
        case .itemByID(let id):
            writer.item(try keychain.item(withID: id))
        case .itemSecret(let id):
            let item = try keychain.item(withID: id)
            // The answer is plaintext of the item's class: wiped once sent, and not delivered once that class's key went.
            contentWatch = AgentDiscardWatch(device: device, protection: item.accessibility.protectionClass)
            answerIsSecret = true
            let secret = try keychain.secret(ofItemWithID: id)
            defer { secret.wipe() }
            writer.secret(secret)
        case .itemUpdate(let id, let label, let attributes, let secret):
            defer { secret?.wipe() }
            writer.item(try keychain.updateItem(withID: id, label: label, attributes: attributes, secret: secret))
        case .itemUpdateAccessibility(let id, let accessibility, let label, let attributes, let secret):
            defer { secret?.wipe() }
            writer.item(try keychain.updateItem(withID: id, label: label, attributes: attributes, secret: secret, accessibility: accessibility))
        case .itemUpdateMatching(let attributes, let label, let newAttributes, let secret):
            defer { secret?.wipe() }
            writer.items(try keychain.update(matching: attributes, label: label, attributes: newAttributes, secret: secret))
        case .itemDelete(let id):
            try keychain.deleteItem(withID: id)
        case .itemDeleteMatching(let attributes):
            writer.u64(UInt64(try keychain.delete(matching: attributes)))
        case .itemGeneration:
            writer.u64(keychain.generation)
        default:
            throw DataProtectionError(.invalidArgument, "Not an item request.")
        }
        return .ok(writer.bytes)
    }
}
