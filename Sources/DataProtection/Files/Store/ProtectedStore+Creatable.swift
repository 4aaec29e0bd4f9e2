import SystemPackage

extension ProtectedStore {
    /// Before missing parent directories of a new file at `path` are made: throws
    /// `protectedDataUnavailable` when the file (of class `protection`, else the class the
    /// new directories would inherit) could not be created now, so that a failed
    /// create changes nothing. Does nothing when the parent exists (nothing to make)
    /// or a component is a file (`makeDirectories` reports `notADirectory`, which wins).
    func checkCreatableBeforeMakingParents(_ path: StorePath, protection: ProtectionClass?) throws(DataProtectionError) {
        var disk = root
        var metadata = try directoryMetadata(at: root, place: .root)
        for name in path.parent.components {
            let entry = disk.appending(try NameCipher.encrypt(name, directoryID: metadata.id, device: device))
            switch try kind(of: entry) {
            case .file:
                return
            case .directory:
                disk = entry
                metadata = try directoryMetadata(at: disk, place: Place(directoryID: metadata.id, name: name))
            case .missing:
                let protectionClass = protection ?? metadata.protectionClass ?? .default
                guard protectionClass == .completeUnlessOpen || device.hasClassKey(for: protectionClass) else {
                    throw device.classUnavailable(protectionClass)
                }
                return
            }
        }
    }
}
