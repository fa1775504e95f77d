// SPDX-License-Identifier: MIT
// A USD price feed for development chains and tests, answering Chainlink's AggregatorV3Interface: each `setPrice`
// starts a new round stamped with the block's time. Its updater is the deployer (the development chain's faucet),
// never a key the API server holds, so a compromised server cannot move the prices the agent accounts' USD caps read.
pragma solidity ^0.8.24;

import {AggregatorV3Interface} from "./AggregatorV3Interface.sol";

contract DevPriceFeed is AggregatorV3Interface {
    struct Round {
        int256 answer;
        uint64 updatedAt;
    }

    error NotUpdater(address caller);
    error NoSuchRound(uint80 roundId);

    event AnswerUpdated(int256 indexed current, uint256 indexed roundId, uint256 updatedAt);

    address public immutable updater;
    uint8 private immutable _decimals;
    string private _description;
    uint80 public latestRound;
    mapping(uint80 roundId => Round) private _rounds;

    constructor(uint8 decimals_, string memory description_, int256 initialAnswer) {
        updater = msg.sender;
        _decimals = decimals_;
        _description = description_;
        _setPrice(initialAnswer);
    }

    function setPrice(int256 answer) external {
        if (msg.sender != updater) revert NotUpdater(msg.sender);
        _setPrice(answer);
    }

    function decimals() external view returns (uint8) {
        return _decimals;
    }

    function description() external view returns (string memory) {
        return _description;
    }

    function version() external pure returns (uint256) {
        return 1;
    }

    function getRoundData(uint80 roundId) public view returns (uint80, int256, uint256, uint256, uint80) {
        Round memory r = _rounds[roundId];
        if (r.updatedAt == 0) revert NoSuchRound(roundId);
        return (roundId, r.answer, r.updatedAt, r.updatedAt, roundId);
    }

    function latestRoundData() external view returns (uint80, int256, uint256, uint256, uint80) {
        return getRoundData(latestRound);
    }

    function _setPrice(int256 answer) private {
        uint80 round = latestRound + 1;
        latestRound = round;
        _rounds[round] = Round(answer, uint64(block.timestamp));
        emit AnswerUpdated(answer, round, block.timestamp);
    }
}
