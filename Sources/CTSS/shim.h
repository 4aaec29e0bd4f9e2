#ifndef DATAPROTECTION_CTSS_SHIM_H
#define DATAPROTECTION_CTSS_SHIM_H
/* tpm2-tss (Debian: libtss2-dev): ESAPI, the TCTI loader, response-code decoding and
   marshalling. Only TPMBridge imports this module. The templates are built here, in C,
   because Swift sees the TPM's nested unions as unwieldy tuples; they are normative
   (Keys/key-hierarchy.md §4.4). */
#include <stdint.h>
#include <string.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_mu.h>

extern void explicit_bzero(void *pointer, size_t count);

/* Overwrites `count` bytes at `pointer` with zeros; never optimised away. */
static inline void dp_tpm_wipe(void *pointer, size_t count) {
    if (pointer != NULL && count > 0) explicit_bzero(pointer, count);
}

/* The storage root key: the TCG "SRK" template, ECC NIST P-256 with AES-128-CFB, under
   the owner hierarchy, empty auth. Deterministic: the same TPM and owner seed always give
   the same key, so it is recreated on demand and never persisted. noDA: its auth is empty
   (nothing to guess), and its use must not stop while the TPM is in lockout. */
static inline void dp_tpm_srk_template(TPM2B_PUBLIC *out) {
    memset(out, 0, sizeof *out);
    out->publicArea.type = TPM2_ALG_ECC;
    out->publicArea.nameAlg = TPM2_ALG_SHA256;
    out->publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
        | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA
        | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    out->publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    out->publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128;
    out->publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    out->publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    out->publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    out->publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    out->publicArea.unique.ecc.x.size = 32;
    out->publicArea.unique.ecc.y.size = 32;
}

/* A keyed-hash HMAC-SHA-256 signing key made inside the TPM (sensitiveDataOrigin), bound to
   it and its parent (fixedTPM, fixedParent), used with its auth value (userWithAuth).
   `dictionaryProtected` clear adds noDA (only for an empty auth value). */
static inline void dp_tpm_hmac_template(TPM2B_PUBLIC *out, int dictionaryProtected) {
    memset(out, 0, sizeof *out);
    out->publicArea.type = TPM2_ALG_KEYEDHASH;
    out->publicArea.nameAlg = TPM2_ALG_SHA256;
    out->publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
        | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_SIGN_ENCRYPT
        | (dictionaryProtected ? 0 : TPMA_OBJECT_NODA);
    out->publicArea.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_HMAC;
    out->publicArea.parameters.keyedHashDetail.scheme.details.hmac.hashAlg = TPM2_ALG_SHA256;
}

/* An NV index of the owner hierarchy read and written with its own (empty) auth, noDA:
   an ordinary index of `size` bytes, or (`counter`) a monotonic 8-byte counter. */
static inline void dp_tpm_nv_template(TPM2B_NV_PUBLIC *out, uint32_t index, uint16_t size, int counter) {
    memset(out, 0, sizeof *out);
    out->nvPublic.nvIndex = index;
    out->nvPublic.nameAlg = TPM2_ALG_SHA256;
    out->nvPublic.attributes = TPMA_NV_AUTHWRITE | TPMA_NV_AUTHREAD | TPMA_NV_NO_DA
        | ((counter ? TPM2_NT_COUNTER : TPM2_NT_ORDINARY) << TPMA_NV_TPM2_NT_SHIFT);
    out->nvPublic.dataSize = counter ? 8 : size;
}

/* The value of one TPM property (TPM2_CAP_TPM_PROPERTIES), 0 if the TPM did not return it. */
static inline uint32_t dp_tpm_property_value(const TPMS_CAPABILITY_DATA *data, uint32_t property) {
    if (data == NULL || data->capability != TPM2_CAP_TPM_PROPERTIES) return 0;
    for (uint32_t i = 0; i < data->data.tpmProperties.count && i < TPM2_MAX_TPM_PROPERTIES; i++) {
        if (data->data.tpmProperties.tpmProperty[i].property == property)
            return data->data.tpmProperties.tpmProperty[i].value;
    }
    return 0;
}

/* The `index`-th handle of a TPM2_CAP_HANDLES answer (0 beyond its count). */
static inline uint32_t dp_tpm_handle_at(const TPMS_CAPABILITY_DATA *data, uint32_t index) {
    if (data == NULL || data->capability != TPM2_CAP_HANDLES || index >= data->data.handles.count) return 0;
    return data->data.handles.handle[index];
}

static inline uint32_t dp_tpm_handle_count(const TPMS_CAPABILITY_DATA *data) {
    if (data == NULL || data->capability != TPM2_CAP_HANDLES) return 0;
    return data->data.handles.count;
}
#endif
