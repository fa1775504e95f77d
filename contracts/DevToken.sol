// SPDX-License-Identifier: MIT
// A plain ERC-20 for development chains and tests (the WETH-like and EURC-like tokens of the dev-chain pools):
// name, symbol and decimals chosen at deployment, EIP-2612 permit (OpenZeppelin's ERC20Permit, EIP-712 version "1"),
// mintable by its owner (the deployer, the development chain's faucet). Not a WETH9: it has no deposit/withdraw.
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Permit.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

contract DevToken is ERC20, ERC20Permit, Ownable {
    uint8 private immutable _decimals;

    constructor(string memory name_, string memory symbol_, uint8 decimals_) ERC20(name_, symbol_) ERC20Permit(name_) Ownable(msg.sender) {
        _decimals = decimals_;
    }

    function decimals() public view override returns (uint8) {
        return _decimals;
    }

    function mint(address to, uint256 value) external onlyOwner {
        _mint(to, value);
    }
}
