import Foundation
import SodiumBridge
import SystemPackage

/// The two place records of a protected file (`Keys/file-format.md` §4.1, §10.2): the
/// last 32 bytes of each 512-byte header slot area, outside the slots themselves, each
/// a ``Place`` tag of the file's id. The file is at its place when either record binds
/// it there.
///
/// Two records make a move atomic: the new place goes into record 1 (durably) before
/// the rename, and into record 0 after it, so the file is bound wherever a crash leaves
/// it. Header writes never touch the records, and rebinding needs no file key: only the
/// metadata key, which every lock state has.
enum FilePlaceRecords {
    /// Where each record starts.
    static let offsets: [Int64] = [
        Int64(FileHeader.slotByteCount - Place.tagByteCount),
        Int64(2 * FileHeader.slotByteCount - Place.tagByteCount),
    ]

    /// The header region of a new file: `slot` then record 0, an empty slot then record 1,
    /// both records binding the file to `tag`'s place.
    static func newRegion(slot: Data, tag: Data) -> Data {
        precondition(slot.count == FileHeader.slotFieldsByteCount && tag.count == Place.tagByteCount)
        return slot + tag + Data(count: FileHeader.slotFieldsByteCount) + tag
    }

    /// Refuses the file open as `file` (whose id is `fileID`) unless it is bound to `place`.
    static func verify(_ file: DataFileDescriptor, fileID: Data, place: Place, device: Device) throws(DataProtectionError) {
        guard try place.isBound(.file, id: fileID, tags: try records(of: file), device: device) else {
            throw notBound(place)
        }
    }

    /// Refuses the file unless it is bound to `place`, as ``verify(_:fileID:place:device:)``
    /// does; then a record that binds another place (left by a move cut short, before or after
    /// its rename) is made to bind `place`, durably, so that the file cannot be moved back to
    /// that place behind the store's back. The caller must exclude moves of the file meanwhile.
    static func settle(_ file: DataFileDescriptor, fileID: Data, place: Place, device: Device) throws(DataProtectionError) {
        let expected = try place.tag(of: .file, id: fileID, device: device)
        let bound = try records(of: file).map { ConstantTime.equals($0, expected) }
        guard bound.contains(true) else { throw notBound(place) }
        guard bound.count == offsets.count, bound.contains(false) else { return }
        for (index, isBound) in bound.enumerated() where !isBound {
            try file.write(expected, at: offsets[index])
        }
        try file.synchronize()
    }

    /// The records of `file` (fewer when it is too short to hold them).
    private static func records(of file: DataFileDescriptor) throws(DataProtectionError) -> [Data] {
        var tags: [Data] = []
        for offset in offsets {
            let record = try file.read(at: offset, count: Place.tagByteCount)
            if record.count == Place.tagByteCount { tags.append(record) }
        }
        return tags
    }

    private static func notBound(_ place: Place) -> DataProtectionError {
        .integrity("A file is not where the store put it (\(place.name.isEmpty ? "the root" : place.name) was moved or swapped on disk behind the store's back).",
                   hint: "Restore the store directory from a backup.")
    }

    /// Moves the file at `path` from `origin` to `destination`: refuses it unless it is bound to
    /// `origin`; makes record 0 bind `origin` (it may hold an older place after a crashed move),
    /// record 1 bind `destination`, durably; runs `rename` (which must make the rename
    /// durable); then makes record 0 bind `destination`. Wherever a crash leaves the file,
    /// one record binds it there.
    static func move(
        fileAt path: FilePath, from origin: Place, to destination: Place, device: Device,
        rename: () throws(DataProtectionError) -> Void
    ) throws(DataProtectionError) {
        let file = try DataFileDescriptor.open(path, fileSystem: device.fileSystem)
        defer { file.close() }
        let next = try bindBoth(file, origin, destination, device: device)
        try rename()
        // The descriptor follows the file through the rename.
        try file.write(next, at: offsets[0])
        try file.synchronize()
    }

    /// The first half of a move: refuses the file unless it is bound to `origin`; makes record 0
    /// bind `origin` and record 1 `destination`, durably, so that it is bound at either place.
    /// Returns `destination`'s tag. ``bind(_:to:device:)`` ends the move.
    @discardableResult
    static func bindBoth(_ file: DataFileDescriptor, _ origin: Place, _ destination: Place, device: Device) throws(DataProtectionError) -> Data {
        let fileID = try fileIDOf(file)
        let current = try origin.tag(of: .file, id: fileID, device: device)
        let tags = try records(of: file)
        let bound = tags.map { ConstantTime.equals($0, current) }
        guard bound.contains(true) else { throw notBound(origin) }
        if bound.first != true {
            try file.write(current, at: offsets[0])
        }
        let next = try destination.tag(of: .file, id: fileID, device: device)
        try file.write(next, at: offsets[1])
        try file.synchronize()
        return next
    }

    /// Writes `place` into both records of `file` and makes them durable (a store migrated to
    /// places). The file's id comes from its header (any well-formed slot: the id never changes).
    static func bind(_ file: DataFileDescriptor, to place: Place, device: Device) throws(DataProtectionError) {
        let tag = try place.tag(of: .file, id: try fileIDOf(file), device: device)
        for offset in offsets { try file.write(tag, at: offset) }
        try file.synchronize()
    }

    /// The id of the file in `file`, from its newest well-formed header slot (the id is the
    /// same in every slot; a forged one only fails to bind).
    static func fileIDOf(_ file: DataFileDescriptor) throws(DataProtectionError) -> Data {
        guard let newest = try CommittedFile.readSlots(file).first else {
            throw .integrity("The file has no valid header: it is not a protected file, or it was tampered with.")
        }
        return newest.1.header.fileID
    }
}
