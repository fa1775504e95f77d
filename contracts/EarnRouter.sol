// SPDX-License-Identifier: MIT
// Vault actions of a wallet submitted by the relayer (which pays the gas) on the wallet's EIP-2612 permit, each in
// one transaction: deposit the wallet's assets (permit on the asset), redeem its shares (permit on the shares), or
// move shares from one vault to another of the same asset (redeem into this contract, deposit for the wallet).
// Minimums are enforced on chain; nothing stays in the router. Only the relayer may act on a permit: the signature
// does not name the vault, so anyone else holding it (or front-running its `permit`) could otherwise pick one.
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {IERC4626} from "@openzeppelin/contracts/interfaces/IERC4626.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

contract EarnRouter {
    using SafeERC20 for IERC20;

    struct Permit {
        uint256 deadline;
        uint8 v;
        bytes32 r;
        bytes32 s;
    }

    error Expired(uint256 deadline);
    error NotRelayer(address caller);

    /// The account allowed to act on a wallet's permit.
    address public immutable relayer;

    constructor(address relayer_) {
        relayer = relayer_;
    }
    error AssetMismatch();
    error BelowMinimum(uint256 amount, uint256 minimum);

    function depositWithPermit(address owner, IERC4626 vault, uint256 assets, uint256 minShares, Permit calldata p) external returns (uint256 shares) {
        IERC20 asset = IERC20(vault.asset());
        _permit(address(asset), owner, assets, p);
        asset.safeTransferFrom(owner, address(this), assets);
        asset.forceApprove(address(vault), assets);
        shares = vault.deposit(assets, owner);
        if (shares < minShares) revert BelowMinimum(shares, minShares);
    }

    function redeemWithPermit(address owner, IERC4626 vault, uint256 shares, uint256 minAssets, Permit calldata p) external returns (uint256 assets) {
        _permit(address(vault), owner, shares, p);
        assets = vault.redeem(shares, owner, owner);
        if (assets < minAssets) revert BelowMinimum(assets, minAssets);
    }

    function moveWithPermit(address owner, IERC4626 fromVault, IERC4626 toVault, uint256 shares, uint256 minShares, Permit calldata p) external returns (uint256 newShares) {
        if (fromVault.asset() != toVault.asset()) revert AssetMismatch();
        _permit(address(fromVault), owner, shares, p);
        uint256 assets = fromVault.redeem(shares, address(this), owner);
        IERC20(toVault.asset()).forceApprove(address(toVault), assets);
        newShares = toVault.deposit(assets, owner);
        if (newShares < minShares) revert BelowMinimum(newShares, minShares);
    }

    /// A permit already used (front-run) is fine when the allowance is there: the transfer decides.
    function _permit(address token, address owner, uint256 value, Permit calldata p) private {
        if (msg.sender != relayer) revert NotRelayer(msg.sender);
        if (block.timestamp > p.deadline) revert Expired(p.deadline);
        try IERC20Permit(token).permit(owner, address(this), value, p.deadline, p.v, p.r, p.s) {} catch {}
    }
}
