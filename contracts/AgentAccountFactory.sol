// SPDX-License-Identifier: MIT
// Deploys agent accounts (contracts/AgentAccount.sol) as ERC-1167 clones (OpenZeppelin's Clones) of one immutable
// implementation, with CREATE2, so an agent's wallet address is known (shown, funded) before the account exists.
// The salt commits to the owner and the first lane key, and the clone is initialized in the transaction that
// creates it: nobody can deploy another owner's account at that address or initialize it first. A clone is ~45
// bytes of code delegating to the implementation, fixed at creation (no upgrade path). `createAccount` is
// idempotent: an account already at the address is returned.
pragma solidity ^0.8.24;

import {Clones} from "@openzeppelin/contracts/proxy/Clones.sol";
import {AgentAccount} from "./AgentAccount.sol";

contract AgentAccountFactory {
    event AccountCreated(address indexed account, address indexed owner, address indexed lane, bytes32 salt);

    address public immutable implementation;

    constructor() {
        implementation = address(new AgentAccount());
    }

    function createAccount(address owner, address lane, bytes32 salt) external returns (address account) {
        bytes32 key = _key(owner, lane, salt);
        account = Clones.predictDeterministicAddress(implementation, key);
        if (account.code.length > 0) return account;
        Clones.cloneDeterministic(implementation, key);
        AgentAccount(payable(account)).initialize(owner, lane);
        emit AccountCreated(account, owner, lane, salt);
    }

    function predictAddress(address owner, address lane, bytes32 salt) external view returns (address) {
        return Clones.predictDeterministicAddress(implementation, _key(owner, lane, salt));
    }

    function _key(address owner, address lane, bytes32 salt) private pure returns (bytes32) {
        return keccak256(abi.encode(owner, lane, salt));
    }
}
