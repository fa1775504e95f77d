// SPDX-License-Identifier: MIT
// Earn rewards on chain (issue 16): holds the reward token (funded by the development bootstrap) and pays a wallet
// its accrued reward. The ledger accrues rewards per share; on a claim the relayer credits the wallet's claimable
// with exactly the ledger's accrual and pays it out in the same transaction (`creditAndClaim`), so the amount on
// chain and in the ledger cannot diverge. Only the relayer may credit or pay.
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

contract RewardsDistributor {
    using SafeERC20 for IERC20;

    error NotRelayer(address caller);
    error NothingToClaim(address account);

    event Credited(address indexed account, uint256 amount);
    event Claimed(address indexed account, uint256 amount);

    /// The reward token paid out.
    IERC20 public immutable token;
    /// The only account allowed to credit and pay.
    address public immutable relayer;
    /// What each account may claim.
    mapping(address => uint256) public claimable;

    constructor(IERC20 token_, address relayer_) {
        token = token_;
        relayer = relayer_;
    }

    modifier onlyRelayer() {
        if (msg.sender != relayer) revert NotRelayer(msg.sender);
        _;
    }

    function credit(address account, uint256 amount) public onlyRelayer {
        claimable[account] += amount;
        emit Credited(account, amount);
    }

    function claim(address account) public onlyRelayer returns (uint256 amount) {
        amount = claimable[account];
        if (amount == 0) revert NothingToClaim(account);
        claimable[account] = 0;
        token.safeTransfer(account, amount);
        emit Claimed(account, amount);
    }

    function creditAndClaim(address account, uint256 amount) external returns (uint256) {
        credit(account, amount);
        return claim(account);
    }
}
