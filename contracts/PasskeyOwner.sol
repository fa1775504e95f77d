// SPDX-License-Identifier: MIT
// An owner's passkey as an agent account's owner (issue 27, docs/CUSTODY.md): an ERC-1271 signer whose only key is a
// WebAuthn P-256 public key. The account's `_authorizeOwner` already accepts ERC-1271 owners (OpenZeppelin's
// SignatureChecker), so handing an account to a passkey is one owner-signed `transferOwnership` to this contract's
// address, and from then on the console signs owner changes itself: the passkey's assertion over challenge = the
// account's EIP-712 digest is the signature (OpenZeppelin's WebAuthn.verify: type, challenge, user presence and
// verification, P-256 with low s; origin and RP id are the authenticator's to check, as OpenZeppelin documents).
//
// One signer per passkey, deployed by PasskeyOwnerFactory as an ERC-1167 clone with the key (qx, qy) as immutable
// arguments in its code (OpenZeppelin Clones): CREATE2 with the key in the init code, so the address is a function of
// (factory, qx, qy) alone, known before deployment, and nobody can deploy anything else there. There is nothing to
// initialize, no storage, no upgrade and no call-out.
pragma solidity ^0.8.24;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {Clones} from "@openzeppelin/contracts/proxy/Clones.sol";
import {P256} from "@openzeppelin/contracts/utils/cryptography/P256.sol";
import {WebAuthn} from "@openzeppelin/contracts/utils/cryptography/WebAuthn.sol";

contract PasskeyOwner is IERC1271 {
    /// The implementation itself holds no key: only its clones answer.
    address private immutable _implementation = address(this);

    /// The passkey's P-256 public key (the clone's immutable arguments).
    function publicKey() public view returns (bytes32 qx, bytes32 qy) {
        if (address(this) == _implementation) return (0, 0);
        return abi.decode(Clones.fetchCloneArgs(address(this)), (bytes32, bytes32));
    }

    /**
     * ERC-1271: `signature` is an ABI-encoded WebAuthn.WebAuthnAuth (r, s, challengeIndex, typeIndex,
     * authenticatorData, clientDataJSON) whose clientDataJSON's challenge is base64url(`hash`).
     */
    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        (bytes32 qx, bytes32 qy) = publicKey();
        if (qx == 0 && qy == 0) return 0xffffffff;
        (bool decoded, WebAuthn.WebAuthnAuth calldata auth) = WebAuthn.tryDecodeAuth(signature);
        if (!decoded) return 0xffffffff;
        return WebAuthn.verify(abi.encodePacked(hash), auth, qx, qy) ? IERC1271.isValidSignature.selector : bytes4(0xffffffff);
    }
}

contract PasskeyOwnerFactory {
    event PasskeyOwnerCreated(address indexed signer, bytes32 qx, bytes32 qy);

    error InvalidPublicKey(bytes32 qx, bytes32 qy);

    address public immutable implementation;

    constructor() {
        implementation = address(new PasskeyOwner());
    }

    /// The signer of the passkey (qx, qy), deployed unless it already is (idempotent; anyone may call).
    function create(bytes32 qx, bytes32 qy) external returns (address signer) {
        if (!P256.isValidPublicKey(qx, qy)) revert InvalidPublicKey(qx, qy);
        bytes memory args = abi.encode(qx, qy);
        signer = Clones.predictDeterministicAddressWithImmutableArgs(implementation, args, bytes32(0));
        if (signer.code.length > 0) return signer;
        Clones.cloneDeterministicWithImmutableArgs(implementation, args, bytes32(0));
        emit PasskeyOwnerCreated(signer, qx, qy);
    }

    function predict(bytes32 qx, bytes32 qy) external view returns (address) {
        return Clones.predictDeterministicAddressWithImmutableArgs(implementation, abi.encode(qx, qy), bytes32(0));
    }
}
