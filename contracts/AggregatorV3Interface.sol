// SPDX-License-Identifier: MIT
// Chainlink's price feed interface, the five functions of @chainlink/contracts'
// src/v0.8/shared/interfaces/AggregatorV3Interface.sol, declared here rather than imported: the npm package
// @chainlink/contracts (1.5.0) depends on a GitHub-hosted package (@zksync/contracts) and a dozen chains' contract
// packages, which this repository may not install. The interface is the same, so a real Chainlink feed answers it.
pragma solidity ^0.8.24;

interface AggregatorV3Interface {
    function decimals() external view returns (uint8);

    function description() external view returns (string memory);

    function version() external view returns (uint256);

    function getRoundData(uint80 _roundId) external view returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound);

    function latestRoundData() external view returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound);
}
