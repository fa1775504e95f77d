// SPDX-License-Identifier: MIT
// The conversion router of development chains: an exact-input swap along a route of Uniswap v2 pairs (deployed
// from @uniswap/v2-core's own compiled artifacts) in ONE transaction: the input moves from the owner to the first
// pair, each pair swaps into the next (the last pays the owner), and the whole transaction reverts unless the owner
// received at least `minAmountOut` of the last token. v2-core has no router of its own; this one is a few lines of
// Uniswap v2 periphery's exact-input path (getAmountOut with the pair's 0.3% fee) plus an EIP-2612 permit, so the
// relayer can submit it and pay the gas while the wallet only signs. Only that relayer may act on a permit: the
// signature does not name the route, so anyone else who saw it (or front-ran its `permit`) could otherwise send
// the allowance through pairs of their own.
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

interface IUniswapV2PairLike {
    function token0() external view returns (address);
    function token1() external view returns (address);
    function getReserves() external view returns (uint112 reserve0, uint112 reserve1, uint32 blockTimestampLast);
    function swap(uint256 amount0Out, uint256 amount1Out, address to, bytes calldata data) external;
}

contract SwapRouter {
    using SafeERC20 for IERC20;

    struct Permit {
        uint256 deadline;
        uint8 v;
        bytes32 r;
        bytes32 s;
    }

    event Swapped(address indexed owner, address indexed tokenIn, address indexed tokenOut, uint256 amountIn, uint256 amountOut);

    error Expired(uint256 deadline);
    error BadRoute();
    error NotRelayer(address caller);

    /// The account allowed to act on a wallet's permit.
    address public immutable relayer;

    constructor(address relayer_) {
        relayer = relayer_;
    }
    error InsufficientOutputAmount(uint256 amountOut, uint256 minAmountOut);

    /// Uniswap v2 `getAmountOut` (fee 0.3%: 997/1000).
    function getAmountOut(uint256 amountIn, uint256 reserveIn, uint256 reserveOut) public pure returns (uint256) {
        uint256 amountInWithFee = amountIn * 997;
        return (amountInWithFee * reserveOut) / (reserveIn * 1000 + amountInWithFee);
    }

    /// Swaps `amountIn` of `path[0]` held by the caller along `pairs` (path[i] -> path[i+1] on pairs[i]) to `to`.
    function swapExactIn(address[] memory pairs, address[] memory path, uint256 amountIn, uint256 minAmountOut, address to, uint256 deadline) external returns (uint256) {
        if (block.timestamp > deadline) revert Expired(deadline);
        return _swap(msg.sender, pairs, path, amountIn, minAmountOut, to);
    }

    /// The same for `owner`, authorised by its EIP-2612 permit to this router (anyone may submit it).
    function swapExactInWithPermit(address owner, address[] memory pairs, address[] memory path, uint256 amountIn, uint256 minAmountOut, Permit calldata permit) external returns (uint256) {
        if (msg.sender != relayer) revert NotRelayer(msg.sender);
        if (block.timestamp > permit.deadline) revert Expired(permit.deadline);
        _permit(path[0], owner, amountIn, permit);
        return _swap(owner, pairs, path, amountIn, minAmountOut, owner);
    }

    /// A permit already used (front-run) is fine when the allowance is there: transferFrom decides.
    function _permit(address token, address owner, uint256 value, Permit calldata p) private {
        try IERC20Permit(token).permit(owner, address(this), value, p.deadline, p.v, p.r, p.s) {} catch {}
    }

    function _swap(address from, address[] memory pairs, address[] memory path, uint256 amountIn, uint256 minAmountOut, address to) private returns (uint256 amountOut) {
        if (pairs.length == 0 || path.length != pairs.length + 1) revert BadRoute();
        uint256 before = IERC20(path[pairs.length]).balanceOf(to);
        IERC20(path[0]).safeTransferFrom(from, pairs[0], amountIn);
        uint256 amount = amountIn;
        for (uint256 i = 0; i < pairs.length; i++) {
            amount = _hop(pairs[i], path[i], path[i + 1], amount, i + 1 < pairs.length ? pairs[i + 1] : to);
        }
        amountOut = IERC20(path[pairs.length]).balanceOf(to) - before;
        if (amountOut < minAmountOut) revert InsufficientOutputAmount(amountOut, minAmountOut);
        emit Swapped(from, path[0], path[pairs.length], amountIn, amountOut);
    }

    /// One pair: `amountIn` of `tokenIn` is already in it; sends the output to `recipient`.
    function _hop(address pairAddress, address tokenIn, address tokenOut, uint256 amountIn, address recipient) private returns (uint256 amount) {
        IUniswapV2PairLike pair = IUniswapV2PairLike(pairAddress);
        bool zeroForOne = tokenIn == pair.token0();
        if (zeroForOne ? pair.token1() != tokenOut : (pair.token1() != tokenIn || pair.token0() != tokenOut)) revert BadRoute();
        (uint112 r0, uint112 r1, ) = pair.getReserves();
        amount = zeroForOne ? getAmountOut(amountIn, r0, r1) : getAmountOut(amountIn, r1, r0);
        pair.swap(zeroForOne ? 0 : amount, zeroForOne ? amount : 0, recipient, new bytes(0));
    }
}
