import Foundation

/// A TPM object as it is kept outside the TPM: its public area and its private area, the
/// latter encrypted by the TPM under its parent (the storage root key), so that only the
/// TPM that made it can load it. Both are tpm2-tss marshalled `TPM2B`s.
package struct TPMKeyBlobs: Sendable, Equatable, Hashable {
    /// The marshalled `TPM2B_PUBLIC`.
    package var publicArea: Data
    /// The marshalled `TPM2B_PRIVATE` (sealed by the TPM; useless without it).
    package var privateArea: Data

    package init(publicArea: Data, privateArea: Data) {
        self.publicArea = publicArea
        self.privateArea = privateArea
    }
}
