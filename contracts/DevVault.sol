// SPDX-License-Identifier: MIT
// An ERC-4626 vault for development chains and tests (OpenZeppelin's ERC4626): shares with EIP-2612 permit (so a
// relayer can redeem or move a wallet's shares on its signature) and a virtual-share decimals offset against the
// inflation attack. Its yield source is the simplest there is: assets transferred in (`agentctl vault accrue`)
// raise `totalAssets` and so every share's `convertToAssets`.
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {ERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Permit.sol";
import {ERC4626} from "@openzeppelin/contracts/token/ERC20/extensions/ERC4626.sol";

contract DevVault is ERC4626, ERC20Permit {
    uint8 private immutable _offset;

    constructor(IERC20 asset_, string memory name_, string memory symbol_, uint8 offset_) ERC20(name_, symbol_) ERC4626(asset_) ERC20Permit(name_) {
        _offset = offset_;
    }

    function decimals() public view override(ERC20, ERC4626) returns (uint8) {
        return super.decimals();
    }

    function _decimalsOffset() internal view override returns (uint8) {
        return _offset;
    }
}
