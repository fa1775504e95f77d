// SPDX-License-Identifier: MIT
// The development chain's WETH: WETH9's deposit/withdraw (1 WETH per wei of ETH sent), as an OpenZeppelin ERC-20 with
// EIP-2612 permit, plus the owner's (the faucet's) `mint` that seeds the pools and funds test wallets. Minted WETH is
// not backed by ETH; what `deposit` wrapped can always be withdrawn (the contract holds at least that ETH).
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Permit.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {Address} from "@openzeppelin/contracts/utils/Address.sol";

contract DevWeth is ERC20, ERC20Permit, Ownable {
    event Deposit(address indexed dst, uint256 wad);
    event Withdrawal(address indexed src, uint256 wad);

    constructor() ERC20("Wrapped Ether", "WETH") ERC20Permit("Wrapped Ether") Ownable(msg.sender) {}

    receive() external payable {
        deposit();
    }

    function deposit() public payable {
        _mint(msg.sender, msg.value);
        emit Deposit(msg.sender, msg.value);
    }

    function withdraw(uint256 wad) external {
        _burn(msg.sender, wad);
        emit Withdrawal(msg.sender, wad);
        Address.sendValue(payable(msg.sender), wad);
    }

    function mint(address to, uint256 value) external onlyOwner {
        _mint(to, value);
    }
}
