// SPDX-License-Identifier: MIT
// Morpho Blue actions of a wallet submitted by the relayer (which pays the gas), each in one transaction: supply
// collateral or repay on the wallet's EIP-2612 permit (on the collateral or the loan token), borrow or withdraw
// collateral on the wallet's Morpho authorization signature (`setAuthorizationWithSig`, this router authorized).
// Repaying by shares (repay_all) pulls at most `maxAssets` and returns the rest: nothing stays in the router. Only
// the relayer may act: the signatures do not name the market, so anyone else holding them could pick one.
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

struct MarketParams {
    address loanToken;
    address collateralToken;
    address oracle;
    address irm;
    uint256 lltv;
}

struct Authorization {
    address authorizer;
    address authorized;
    bool isAuthorized;
    uint256 nonce;
    uint256 deadline;
}

struct Signature {
    uint8 v;
    bytes32 r;
    bytes32 s;
}

interface IMorphoLike {
    function supplyCollateral(MarketParams memory marketParams, uint256 assets, address onBehalf, bytes memory data) external;
    function withdrawCollateral(MarketParams memory marketParams, uint256 assets, address onBehalf, address receiver) external;
    function borrow(MarketParams memory marketParams, uint256 assets, uint256 shares, address onBehalf, address receiver) external returns (uint256, uint256);
    function repay(MarketParams memory marketParams, uint256 assets, uint256 shares, address onBehalf, bytes memory data) external returns (uint256, uint256);
    function setAuthorizationWithSig(Authorization calldata authorization, Signature calldata signature) external;
    function isAuthorized(address authorizer, address authorized) external view returns (bool);
}

contract BorrowRouter {
    using SafeERC20 for IERC20;

    struct Permit {
        uint256 deadline;
        uint8 v;
        bytes32 r;
        bytes32 s;
    }

    error Expired(uint256 deadline);
    error NotRelayer(address caller);
    error WrongAuthorization();
    error AboveMaximum(uint256 amount, uint256 maximum);

    /// The account allowed to act on a wallet's signatures.
    address public immutable relayer;
    IMorphoLike public immutable morpho;

    constructor(address relayer_, IMorphoLike morpho_) {
        relayer = relayer_;
        morpho = morpho_;
    }

    function supplyCollateralWithPermit(address owner, MarketParams calldata market, uint256 assets, Permit calldata p) external {
        _permit(market.collateralToken, owner, assets, p);
        IERC20(market.collateralToken).safeTransferFrom(owner, address(this), assets);
        IERC20(market.collateralToken).forceApprove(address(morpho), assets);
        morpho.supplyCollateral(market, assets, owner, "");
    }

    /// Repays `assets`, or `shares` when `assets` is 0, pulling at most `maxAssets` of the loan token (the rest returns).
    function repayWithPermit(address owner, MarketParams calldata market, uint256 assets, uint256 shares, uint256 maxAssets, Permit calldata p) external returns (uint256 repaid, uint256 repaidShares) {
        _permit(market.loanToken, owner, maxAssets, p);
        IERC20 loan = IERC20(market.loanToken);
        loan.safeTransferFrom(owner, address(this), maxAssets);
        loan.forceApprove(address(morpho), maxAssets);
        (repaid, repaidShares) = morpho.repay(market, assets, shares, owner, "");
        if (repaid > maxAssets) revert AboveMaximum(repaid, maxAssets);
        loan.forceApprove(address(morpho), 0);
        if (maxAssets > repaid) loan.safeTransfer(owner, maxAssets - repaid);
    }

    function borrowWithSig(address owner, MarketParams calldata market, uint256 assets, Authorization calldata auth, Signature calldata sig) external returns (uint256 borrowed, uint256 shares) {
        _authorize(owner, auth, sig);
        (borrowed, shares) = morpho.borrow(market, assets, 0, owner, owner);
    }

    function withdrawCollateralWithSig(address owner, MarketParams calldata market, uint256 assets, Authorization calldata auth, Signature calldata sig) external {
        _authorize(owner, auth, sig);
        morpho.withdrawCollateral(market, assets, owner, owner);
    }

    /// A permit already used (front-run) is fine when the allowance is there: the transfer decides.
    function _permit(address token, address owner, uint256 value, Permit calldata p) private {
        if (msg.sender != relayer) revert NotRelayer(msg.sender);
        if (block.timestamp > p.deadline) revert Expired(p.deadline);
        try IERC20Permit(token).permit(owner, address(this), value, p.deadline, p.v, p.r, p.s) {} catch {}
    }

    /// The wallet's authorization of this router on Morpho; already set (or front-run) is fine: Morpho's check decides.
    function _authorize(address owner, Authorization calldata auth, Signature calldata sig) private {
        if (msg.sender != relayer) revert NotRelayer(msg.sender);
        if (auth.authorizer != owner || auth.authorized != address(this) || !auth.isAuthorized) revert WrongAuthorization();
        if (!morpho.isAuthorized(owner, address(this))) morpho.setAuthorizationWithSig(auth, sig);
    }
}
