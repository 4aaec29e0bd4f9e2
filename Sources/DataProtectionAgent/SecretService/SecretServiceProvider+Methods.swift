import DBusBridge
import DataProtection
import DataProtectionSQLite
import Foundation

/// The objects of the Secret Service API: the service, the collection (also at the `default`
/// alias), items, sessions and prompts, with `org.freedesktop.DBus.Properties`.
extension SecretServiceProvider {
    /// Answers a method call to any object under `/org/freedesktop/secrets` (`false`: not ours,
    /// sd-bus answers `UnknownMethod`/`UnknownObject`).
    func handle(_ message: DBusMessage) throws(DBusError) -> Bool {
        guard message.kind == .methodCall, let path = message.path, let member = message.member else { return false }
        state.withLock { $0.whenCalled }?()
        if message.interface == "org.freedesktop.DBus.Introspectable" { return false }
        if message.interface == "org.freedesktop.DBus.Properties" { return try handleProperties(message, path: path, member: member) }
        if path == Self.servicePath { return try handleService(message, member: member) }
        if path == Self.collectionPath || path == Self.defaultAliasPath { return try handleCollection(message, member: member) }
        if let id = Self.itemIdentifier(path) { return try handleItem(message, id: id, member: member) }
        if let session = state.withLock({ $0.sessions[path] }) {
            guard member == "Close" else { return false }
            state.withLock { _ = $0.sessions.removeValue(forKey: path) }
            session.close()
            try message.reply()
            return true
        }
        if let prompt = state.withLock({ $0.prompts[path] }) { return try prompt.handle(message) }
        return false
    }

    // MARK: - The service

    private func handleService(_ message: DBusMessage, member: String) throws(DBusError) -> Bool {
        let arguments = message.arguments
        switch member {
        case "OpenSession":
            guard arguments.count == 2, let algorithm = arguments[0].stringValue else { throw DBusError.invalidArguments("OpenSession takes (sv).") }
            let path = newObjectPath("session")
            let (session, output) = try SecretServiceSession.open(algorithm: algorithm, input: arguments[1], path: path, owner: message.sender)
            state.withLock { state in
                // A bound on what clients that never Close can leave.
                if state.sessions.count >= 4096, let oldest = state.sessions.keys.min(by: Self.objectOrder) {
                    state.sessions.removeValue(forKey: oldest)?.close()
                }
                state.sessions[path] = session
            }
            try message.reply([output, .objectPath(path)])
        case "SearchItems":
            let (unlocked, locked) = try search(arguments.first)
            try message.reply([.objectPaths(unlocked), .objectPaths(locked)])
        case "Unlock":
            let objects = arguments.first?.elements?.compactMap(\.stringValue) ?? []
            try unlock(objects, message)
        case "Lock":
            let objects = arguments.first?.elements?.compactMap(\.stringValue) ?? []
            do {
                try keychain.store.device.lock()
            } catch {
                throw Self.busError(error)
            }
            try message.reply([.objectPaths(objects), .objectPath("/")])
        case "GetSecrets":
            guard arguments.count == 2, let session = arguments[1].stringValue else { throw DBusError.invalidArguments("GetSecrets takes (aoo).") }
            let open = try self.session(session, for: message)
            var secrets: [(DBusValue, DBusValue)] = []
            for path in arguments[0].elements?.compactMap(\.stringValue) ?? [] {
                guard let id = Self.itemIdentifier(path), let secret = try? keychain.secret(ofItemWithID: id) else { continue }
                secrets.append((.objectPath(path), try open.encode(secret)))
            }
            try message.reply([.dictionary(keySignature: "o", valueSignature: "(oayays)", secrets)], sensitive: true)
        case "ReadAlias":
            let name = arguments.first?.stringValue ?? ""
            try message.reply([.objectPath(name == "default" ? Self.collectionPath : "/")])
        case "SetAlias":
            guard arguments.count == 2, arguments[0].stringValue == "default",
                  [Self.collectionPath, Self.defaultAliasPath].contains(arguments[1].stringValue ?? "") else {
                throw DBusError(name: "org.freedesktop.DBus.Error.NotSupported",
                                message: "This Secret Service has one collection, the store's keychain; its alias is default.")
            }
            try message.reply()
        case "CreateCollection":
            // One collection: asking for one gives it (libsecret asks when the default alias is missing).
            try message.reply([.objectPath(Self.collectionPath), .objectPath("/")])
        default:
            return false
        }
        return true
    }

    /// Object paths in the order they were made (`…/s9` before `…/s10`).
    static func objectOrder(_ a: String, _ b: String) -> Bool {
        (a.count, a) < (b.count, b)
    }

    /// The session at `path`, when it is the caller's.
    private func session(_ path: String, for message: DBusMessage) throws(DBusError) -> SecretServiceSession {
        guard let session = state.withLock({ $0.sessions[path] }), session.owner == nil || session.owner == message.sender else {
            throw DBusError(name: "org.freedesktop.Secret.Error.NoSession", message: "No session \(path) of this client.")
        }
        return session
    }

    /// The items matching `attributes` (an `a{ss}`): unlocked ones, and the locked ones known.
    private func search(_ attributes: DBusValue?) throws(DBusError) -> (unlocked: [String], locked: [String]) {
        let wanted = try Self.attributes(attributes)
        let search: ItemSearch
        do {
            search = try keychain.items(matching: wanted)
        } catch {
            throw Self.busError(error)
        }
        let device = keychain.store.device
        remember(search.items)
        var unlocked: [String] = [], locked: [String] = []
        for item in search.items {
            if device.isAvailable(item.accessibility.protectionClass) { unlocked.append(Self.itemPath(item.id)) } else { locked.append(Self.itemPath(item.id)) }
        }
        return (unlocked, locked)
    }

    /// Records the accessibility of `items` (their `Locked` when their class is unavailable later).
    func remember(_ items: [KeychainItem]) {
        state.withLock { state in
            for item in items { state.accessibilities[item.id] = item.accessibility }
        }
    }

    static func attributes(_ value: DBusValue?) throws(DBusError) -> [String: String] {
        guard let value, let dictionary = value.unwrapped.stringKeyedDictionary else { throw DBusError.invalidArguments("Attributes are a{ss}.") }
        var attributes: [String: String] = [:]
        for (key, value) in dictionary {
            guard let string = value.stringValue else { throw DBusError.invalidArguments("Attributes are a{ss}.") }
            attributes[key] = string
        }
        return attributes
    }

    /// `Unlock`: what is unlocked already, and a prompt for the rest.
    private func unlock(_ objects: [String], _ message: DBusMessage) throws(DBusError) {
        let device = keychain.store.device
        var unlocked: [String] = [], waiting: [String] = []
        for object in objects {
            let isLocked: Bool
            if let id = Self.itemIdentifier(object) {
                isLocked = itemLocked(id)
            } else {
                isLocked = (object == Self.collectionPath || object == Self.defaultAliasPath) ? collectionLocked : false
            }
            if isLocked { waiting.append(object) } else { unlocked.append(object) }
        }
        guard !waiting.isEmpty else {
            try message.reply([.objectPaths(unlocked), .objectPath("/")])
            return
        }
        let path = newObjectPath("prompt")
        let prompt = SecretServicePrompt(path: path, objects: waiting, device: device, connection: connection, timeout: promptTimeout) { [weak self] in
            self?.state.withLock { _ = $0.prompts.removeValue(forKey: path) }
        }
        state.withLock { $0.prompts[path] = prompt }
        logger.info("secret-service: unlock asked; \(SecretServicePrompt.instruction)")
        try message.reply([.objectPaths(unlocked), .objectPath(path)])
    }

    /// Whether item `id` is locked now (its class unavailable), as far as is known.
    func itemLocked(_ id: String) -> Bool {
        let device = keychain.store.device
        if let accessibility = state.withLock({ $0.accessibilities[id] }) { return !device.isAvailable(accessibility.protectionClass) }
        do {
            let item = try keychain.item(withID: id)
            remember([item])
            return !device.isAvailable(item.accessibility.protectionClass)
        } catch {
            return error.code == .protectedDataUnavailable
        }
    }

    // MARK: - The collection

    private func handleCollection(_ message: DBusMessage, member: String) throws(DBusError) -> Bool {
        let arguments = message.arguments
        switch member {
        case "SearchItems":
            let (unlocked, _) = try search(arguments.first)
            try message.reply([.objectPaths(unlocked)])
        case "CreateItem":
            message.markSensitive()
            guard arguments.count == 3, let properties = arguments[0].stringKeyedDictionary, let secretFields = arguments[1].elements,
                  let replace = arguments[2].boolValue, let sessionPath = secretFields.first?.stringValue else {
                throw DBusError.invalidArguments("CreateItem takes (a{sv}(oayays)b).")
            }
            let label = properties["org.freedesktop.Secret.Item.Label"]?.stringValue ?? ""
            let attributes = try properties["org.freedesktop.Secret.Item.Attributes"].map { value throws(DBusError) in try Self.attributes(value) } ?? [:]
            let secret = try session(sessionPath, for: message).decode(secretFields)
            defer { secret.wipe() }
            try announcing { () throws(DBusError) -> [ItemSignal] in
                let item: KeychainItem
                do throws(DataProtectionError) {
                    item = try keychain.add(secret, label: label, attributes: attributes, accessibility: .whenUnlocked, replacing: replace)
                } catch {
                    throw Self.busError(error)
                }
                remember([item])
                let existed = state.withLock { $0.announced[item.id] != nil }
                try message.reply([.objectPath(Self.itemPath(item.id)), .objectPath("/")])
                return [(existed ? "ItemChanged" : "ItemCreated", item.id, item)]
            }
        case "Delete":
            throw DBusError(name: "org.freedesktop.DBus.Error.NotSupported",
                            message: "The collection is the store's keychain and cannot be deleted; delete its items, or erase the store (`dpctl erase`).")
        default:
            return false
        }
        return true
    }

    /// The collection's properties.
    func collectionProperties() throws(DBusError) -> [String: DBusValue] {
        var items: [KeychainItem] = []
        if let search = try? keychain.items(matching: [:]) {
            items = search.items
            remember(items)
        }
        let modified = items.map(\.modificationDate).max().map { UInt64(max(0, $0.timeIntervalSince1970)) } ?? 0
        let created = items.map(\.creationDate).min().map { UInt64(max(0, $0.timeIntervalSince1970)) } ?? 0
        return ["Items": .objectPaths(items.map { Self.itemPath($0.id) }), "Label": .string("Keychain"), "Locked": .boolean(collectionLocked),
                "Created": .uint64(created), "Modified": .uint64(modified)]
    }

    // MARK: - Items

    private func handleItem(_ message: DBusMessage, id: String, member: String) throws(DBusError) -> Bool {
        switch member {
        case "GetSecret":
            guard let sessionPath = message.arguments.first?.stringValue else { throw DBusError.invalidArguments("GetSecret takes (o).") }
            let open = try session(sessionPath, for: message)
            let secret: ItemSecret
            do {
                secret = try keychain.secret(ofItemWithID: id)
            } catch {
                throw Self.busError(error)
            }
            try message.reply([try open.encode(secret)], sensitive: true)
        case "SetSecret":
            message.markSensitive()
            guard let fields = message.arguments.first?.elements, let sessionPath = fields.first?.stringValue else {
                throw DBusError.invalidArguments("SetSecret takes ((oayays)).")
            }
            let secret = try session(sessionPath, for: message).decode(fields)
            defer { secret.wipe() }
            try update(id, secret: secret) { () throws(DBusError) in try message.reply() }
        case "Delete":
            try announcing { () throws(DBusError) -> [ItemSignal] in
                do throws(DataProtectionError) {
                    try keychain.deleteItem(withID: id)
                } catch {
                    throw Self.busError(error)
                }
                state.withLock { _ = $0.accessibilities.removeValue(forKey: id) }
                try message.reply([.objectPath("/")])
                return [("ItemDeleted", id, nil)]
            }
        default:
            return false
        }
        return true
    }

    /// Changes item `id` and announces it; `reply` answers the client first.
    private func update(_ id: String, label: String? = nil, attributes: [String: String]? = nil, secret: ItemSecret? = nil,
                        reply: () throws(DBusError) -> Void) throws(DBusError) {
        try announcing { () throws(DBusError) -> [ItemSignal] in
            let item: KeychainItem
            do throws(DataProtectionError) {
                item = try keychain.updateItem(withID: id, label: label, attributes: attributes, secret: secret)
            } catch {
                throw Self.busError(error)
            }
            try reply()
            return [("ItemChanged", id, item)]
        }
    }

    /// An item's properties; a locked item shows only `Locked` (its label and attributes are encrypted under its class key).
    func itemProperties(_ id: String) throws(DBusError) -> [String: DBusValue] {
        let item: KeychainItem
        do {
            item = try keychain.item(withID: id)
        } catch {
            if error.code == .protectedDataUnavailable, itemLocked(id) { return ["Locked": .boolean(true)] }
            throw Self.busError(error)
        }
        remember([item])
        return ["Locked": .boolean(!keychain.store.device.isAvailable(item.accessibility.protectionClass)),
                "Attributes": .stringDictionary(item.attributes), "Label": .string(item.label),
                "Created": .uint64(UInt64(max(0, item.creationDate.timeIntervalSince1970))),
                "Modified": .uint64(UInt64(max(0, item.modificationDate.timeIntervalSince1970)))]
    }

    // MARK: - Properties

    private func handleProperties(_ message: DBusMessage, path: String, member: String) throws(DBusError) -> Bool {
        let arguments = message.arguments
        let all: [String: DBusValue]
        let interface: String
        if path == Self.servicePath {
            interface = "org.freedesktop.Secret.Service"
            all = ["Collections": .objectPaths([Self.collectionPath])]
        } else if path == Self.collectionPath || path == Self.defaultAliasPath {
            interface = "org.freedesktop.Secret.Collection"
            all = member == "Set" ? [:] : try collectionProperties()
        } else if let id = Self.itemIdentifier(path) {
            interface = "org.freedesktop.Secret.Item"
            all = member == "Set" ? [:] : try itemProperties(id)
        } else {
            return false
        }
        if let asked = arguments.first?.stringValue, !asked.isEmpty, asked != interface {
            throw DBusError(name: "org.freedesktop.DBus.Error.UnknownInterface", message: "\(path) has no interface \(asked).")
        }
        switch member {
        case "Get":
            guard arguments.count == 2, let name = arguments[1].stringValue else { throw DBusError.invalidArguments("Get takes (ss).") }
            guard let value = all[name] else {
                if Self.itemIdentifier(path) != nil, ["Label", "Attributes", "Created", "Modified"].contains(name) {
                    throw DBusError(name: "org.freedesktop.Secret.Error.IsLocked", message: "The item is locked. \(SecretServicePrompt.instruction)")
                }
                throw DBusError(name: "org.freedesktop.DBus.Error.UnknownProperty", message: "\(interface) has no property \(name).")
            }
            try message.reply([.variant(value)])
        case "GetAll":
            try message.reply([.properties(all)])
        case "Set":
            guard arguments.count == 3, let name = arguments[1].stringValue, let id = Self.itemIdentifier(path) else {
                throw DBusError(name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: "Only an item's Label and Attributes can be set here.")
            }
            let reply = { () throws(DBusError) in try message.reply() }
            switch name {
            case "Label":
                guard let label = arguments[2].unwrapped.stringValue else { throw DBusError.invalidArguments("Label is a string.") }
                try update(id, label: label, reply: reply)
            case "Attributes":
                try update(id, attributes: try Self.attributes(arguments[2].unwrapped), reply: reply)
            default:
                throw DBusError(name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: "\(name) cannot be set.")
            }
        default:
            return false
        }
        return true
    }
}
