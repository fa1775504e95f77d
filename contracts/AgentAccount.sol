// SPDX-License-Identifier: MIT
// An agent's wallet whose limits hold on chain (issue 24, docs/CUSTODY.md). It holds the agent's funds; its owner is
// the owner's signer (a key the API server never holds); the agent acts through a `lane` key the server holds, and
// every lane call is checked here against the owner's policy: allowed assets priced by a USD feed, per-transaction,
// per-period and lifetime USD caps, transactions per period, a cooldown in blocks, allowed protocol contracts and
// Morpho markets, payees and time-locked trusted destinations, one-off cheques the owner may cancel until they
// unlock, the owner's approval of a transfer above a threshold or to a new payee, and a pause only the owner lifts. The lane functions build their own calls, so swap output, vault shares
// and withdrawals and borrowed funds land in this account. Only the owner (calling, or by an EIP-712 message it
// signed, relayed by anyone) changes the policy, the lane key or the owner. Each account is an ERC-1167 clone of one
// implementation (AgentAccountFactory): the clone's code names that implementation for good, and neither has an
// upgrade, a delegatecall to a caller-chosen address or a selfdestruct, so the code cannot be replaced.
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Metadata} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Metadata.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IERC4626} from "@openzeppelin/contracts/interfaces/IERC4626.sol";
import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {MessageHashUtils} from "@openzeppelin/contracts/utils/cryptography/MessageHashUtils.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";
import {NoncesKeyed} from "@openzeppelin/contracts/utils/NoncesKeyed.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {Address} from "@openzeppelin/contracts/utils/Address.sol";
import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {AggregatorV3Interface} from "./AggregatorV3Interface.sol";

/// Morpho Blue's market parameters (its MarketParams); the market id is keccak256 of their ABI encoding.
struct MorphoMarket {
    address loanToken;
    address collateralToken;
    address oracle;
    address irm;
    uint256 lltv;
}

interface IMorphoBlue {
    function supplyCollateral(MorphoMarket memory marketParams, uint256 assets, address onBehalf, bytes memory data) external;
    function withdrawCollateral(MorphoMarket memory marketParams, uint256 assets, address onBehalf, address receiver) external;
    function borrow(MorphoMarket memory marketParams, uint256 assets, uint256 shares, address onBehalf, address receiver) external returns (uint256, uint256);
    function repay(MorphoMarket memory marketParams, uint256 assets, uint256 shares, address onBehalf, bytes memory data) external returns (uint256, uint256);
    function position(bytes32 id, address user) external view returns (uint256 supplyShares, uint128 borrowShares, uint128 collateral);
    function market(bytes32 id) external view returns (uint128 totalSupplyAssets, uint128 totalSupplyShares, uint128 totalBorrowAssets, uint128 totalBorrowShares, uint128 lastUpdate, uint128 fee);
}

interface IMorphoOracle {
    function price() external view returns (uint256);
}

/// The development chain's router (contracts/SwapRouter.sol): swaps the caller's `amountIn` along Uniswap v2 pairs to `to`.
interface ISwapRouterLike {
    function swapExactIn(address[] memory pairs, address[] memory path, uint256 amountIn, uint256 minAmountOut, address to, uint256 deadline) external returns (uint256);
}

/// WETH9's wrapping functions.
interface IWETH {
    function deposit() external payable;
    function withdraw(uint256 amount) external;
}

contract AgentAccount is EIP712, NoncesKeyed, Pausable, ReentrancyGuardTransient, IERC1271 {
    using SafeERC20 for IERC20;

    /// The owner's caps. USD amounts have 8 decimals; `type(uint256).max` (and `type(uint32).max` transactions) is "no cap".
    struct Limits {
        uint256 perTxUsd;
        uint256 perPeriodUsd;
        uint256 lifetimeUsd;
        uint32 maxTxsPerPeriod;
        /// Blocks that must pass after a lane transaction before the next (0: none).
        uint32 cooldownBlocks;
        /// 1 day, 2 week (from Monday), 3 month: UTC calendar periods, as the database's policy counts them.
        uint8 period;
        /// A swap's minimum output: the oracle value of its input less this much.
        uint16 maxSlippageBps;
        /// A Morpho position's debt over its collateral value (the market's oracle) after a borrow or withdrawal.
        uint16 maxLtvBps;
        /// A zero or negative feed answer refuses the call (otherwise the amount counts as 0 USD).
        bool failOnZeroPrice;
        /// Payments and x402 authorizations may go to any address (still within the caps), not only payees and
        /// trusted destinations: the owner's explicit choice (`allowed_recipients: all`).
        bool anyRecipient;
        /// The least time between issuing a cheque and its unlock, during which the owner may cancel it.
        uint32 minChequeDelay;
        /// A payment, cheque or x402 authorization worth more than this needs the owner's `approveSpend` of that exact
        /// transfer, consumed by the call (issue 27; `type(uint256).max`: no threshold).
        uint256 approvalThresholdUsd;
        /// Swaps per period (issue 26; `type(uint32).max`: no cap).
        uint32 maxSwapsPerPeriod;
        /// The first payment, cheque or x402 authorization to an address the account never paid (`paidBefore`) needs
        /// the owner's `approveSpend` of that exact transfer, as above the threshold (issue 27's approve_new_payees);
        /// trusted destinations whose time lock passed are the owner's already.
        bool approveNewPayees;
    }

    /// An allowed asset (address(0) = the native coin) and its USD feed; `maxPriceAge` seconds (0: not checked).
    struct AssetRule {
        address token;
        address feed;
        uint32 maxPriceAge;
    }

    struct Usage {
        uint64 periodStart;
        uint32 periodTxs;
        uint64 lastTxBlock;
        uint32 periodSwaps;
        uint256 periodUsd;
        uint256 lifetimeUsd;
    }

    /// What the lane may still do now (read by the server for /self/limits and by the drill as the exposure).
    struct Allowance {
        uint256 perTxUsd;
        uint256 periodRemainingUsd;
        uint256 lifetimeRemainingUsd;
        uint32 txsRemaining;
        uint64 nextTxBlock;
        /// Most USD the lane can move out from now on in this period: 0 when paused or out of transactions.
        uint256 exposureUsd;
    }

    struct Cheque {
        address token;
        address to;
        uint256 amount;
        uint64 unlockAt;
        uint64 expiresAt;
        /// 0 none, 1 pending, 2 claimed, 3 cancelled.
        uint8 status;
    }

    /// The owner's EIP-712 signature on an owner action; ignored when the owner itself calls.
    struct OwnerAuth {
        uint256 nonce;
        uint256 deadline;
        bytes signature;
    }

    struct AssetConfig {
        address feed;
        uint32 maxPriceAge;
        uint8 tokenDecimals;
        uint8 feedDecimals;
        uint64 version;
    }

    bytes32 private constant LANE_CALL_TYPEHASH = keccak256("LaneCall(bytes data,bytes32 nonce,uint256 deadline)");
    bytes32 private constant LIMITS_TYPEHASH =
        keccak256("Limits(uint256 perTxUsd,uint256 perPeriodUsd,uint256 lifetimeUsd,uint32 maxTxsPerPeriod,uint32 cooldownBlocks,uint8 period,uint16 maxSlippageBps,uint16 maxLtvBps,bool failOnZeroPrice,bool anyRecipient,uint32 minChequeDelay,uint256 approvalThresholdUsd,uint32 maxSwapsPerPeriod,bool approveNewPayees)");
    bytes32 private constant ASSET_RULE_TYPEHASH = keccak256("AssetRule(address token,address feed,uint32 maxPriceAge)");
    bytes32 private constant SET_POLICY_TYPEHASH =
        keccak256(
            "SetPolicy(Limits limits,AssetRule[] assets,address[] protocols,bytes32[] markets,address[] payees,address[] paidBefore,uint256 nonce,uint256 deadline)"
            "AssetRule(address token,address feed,uint32 maxPriceAge)"
            "Limits(uint256 perTxUsd,uint256 perPeriodUsd,uint256 lifetimeUsd,uint32 maxTxsPerPeriod,uint32 cooldownBlocks,uint8 period,uint16 maxSlippageBps,uint16 maxLtvBps,bool failOnZeroPrice,bool anyRecipient,uint32 minChequeDelay,uint256 approvalThresholdUsd,uint32 maxSwapsPerPeriod,bool approveNewPayees)"
        );
    bytes32 private constant ADD_TRUSTED_DESTINATION_TYPEHASH = keccak256("AddTrustedDestination(address destination,uint64 unlockAt,uint256 nonce,uint256 deadline)");
    bytes32 private constant REMOVE_TRUSTED_DESTINATION_TYPEHASH = keccak256("RemoveTrustedDestination(address destination,uint256 nonce,uint256 deadline)");
    bytes32 private constant CANCEL_CHEQUE_TYPEHASH = keccak256("CancelCheque(bytes32 id,uint256 nonce,uint256 deadline)");
    bytes32 private constant PAUSE_TYPEHASH = keccak256("Pause(uint256 nonce,uint256 deadline)");
    bytes32 private constant RESUME_TYPEHASH = keccak256("Resume(uint256 nonce,uint256 deadline)");
    bytes32 private constant ROTATE_LANE_TYPEHASH = keccak256("RotateLane(address newLane,uint256 nonce,uint256 deadline)");
    bytes32 private constant APPROVE_SPEND_TYPEHASH = keccak256("ApproveSpend(bytes32 operationId,address token,address to,uint256 amount,uint256 nonce,uint256 deadline)");
    bytes32 private constant TRANSFER_OWNERSHIP_TYPEHASH = keccak256("TransferOwnership(address newOwner,uint256 nonce,uint256 deadline)");
    /// EIP-3009 as USDC (FiatTokenV2) hashes it; the account signs it by ERC-1271 once the lane authorized it.
    bytes32 private constant TRANSFER_WITH_AUTHORIZATION_TYPEHASH =
        keccak256("TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)");

    address public owner;
    address public lane;
    /// Bumped by every SetPolicy: rules of older versions no longer allow anything.
    uint64 public policyVersion;
    /// The policy in force, hashed (see `policyHashOf`): the server compares its mirror with it to find drift; the
    /// lists themselves are in the setPolicy transaction's input and answer `isAllowed*` / `isPayee` one by one.
    bytes32 public policyHash;
    Limits private _limits;
    Usage private _usage;
    mapping(address token => AssetConfig) private _assets;
    mapping(address target => uint64 version) private _protocols;
    mapping(bytes32 marketId => uint64 version) private _markets;
    mapping(address payee => uint64 version) private _payees;
    /// Trusted destination => the time from which the lane may pay it (0: not trusted).
    mapping(address destination => uint64 unlockAt) public trustedUnlockAt;
    mapping(bytes32 id => Cheque) private _cheques;
    /// EIP-3009 digests the account vouches for (ERC-1271), with their validBefore.
    mapping(bytes32 digest => uint256 validBefore) public x402Authorized;
    mapping(bytes32 nonce => bool) public laneNonceUsed;
    /// keccak256(abi.encode(token, to, amount)) => transfers of exactly that the owner approved and the lane has not made yet.
    mapping(bytes32 transfer => uint256 count) public spendApprovals;
    /// Addresses a lane transfer (pay, cheque, x402) went to, or the owner's setPolicy listed as paid before: no longer
    /// new payees for `approveNewPayees`. Kept across policies (it is history), never cleared.
    mapping(address payee => bool) public paidBefore;
    /// Set for the duration of a relayed lane call (`relayLane`), whose self-call then acts as the lane.
    bool private transient _laneRelayed;
    /// What the last swap of this transaction delivered: `wrapEth(weth, 0, true)` unwraps exactly that (issue 30).
    address private transient _swapOutToken;
    uint256 private transient _swapOut;

    event OwnerChanged(address indexed previousOwner, address indexed newOwner);
    event LaneRotated(address indexed previousLane, address indexed newLane);
    event PolicySet(uint64 indexed version, bytes32 policyHash);
    event TrustedDestinationAdded(address indexed destination, uint64 unlockAt);
    event TrustedDestinationRemoved(address indexed destination);
    event TrustedDestinationConfirmed(address indexed destination);
    /// Every lane action that counts toward the caps: `action` is the lane function's selector.
    event Spent(bytes4 indexed action, address indexed token, address indexed counterparty, uint256 amount, uint256 usd);
    event ChequeIssued(bytes32 indexed id, address indexed token, address indexed to, uint256 amount, uint64 unlockAt, uint64 expiresAt);
    event ChequeClaimed(bytes32 indexed id);
    event ChequeCancelled(bytes32 indexed id);
    event SpendApproved(bytes32 indexed operationId, address indexed token, address indexed to, uint256 amount);
    event X402Authorized(bytes32 indexed digest, address indexed token, address indexed to, uint256 value, bytes32 nonce);

    error AlreadyInitialized();
    error NotOwner(address caller);
    error NotLane(address caller);
    error InvalidOwnerSignature();
    error InvalidLaneSignature();
    error SignatureExpired(uint256 deadline);
    error LaneNonceUsed(bytes32 nonce);
    error InvalidAddress(address account);
    error InvalidLimits();
    error AssetNotAllowed(address token);
    error ProtocolNotAllowed(address target);
    error MarketNotAllowed(bytes32 marketId);
    error RecipientNotAllowed(address to);
    error TimeLockNotReached(uint64 unlockAt);
    error NotTrusted(address destination);
    error StalePrice(address token, uint256 updatedAt);
    error ZeroPrice(address token);
    error PerTxCapExceeded(uint256 usd, uint256 cap);
    error PeriodCapExceeded(uint256 usd, uint256 remaining);
    error LifetimeCapExceeded(uint256 usd, uint256 remaining);
    error TooManyTransactions(uint32 max);
    error TooManySwaps(uint32 max);
    error ApprovalRequired(uint256 usd, uint256 threshold);
    error CooldownActive(uint64 nextTxBlock);
    error InsufficientOutput(uint256 amountOut, uint256 minAmountOut);
    error LtvExceeded(uint256 ltvBps, uint256 maxLtvBps);
    error ChequeExists(bytes32 id);
    error ChequeNotPending(bytes32 id);
    error ChequeLocked(uint64 unlockAt);
    error ChequeExpired(uint64 expiresAt);
    error ChequeUnlocked(uint64 unlockAt);
    error BadCheque();
    error BadRoute();

    /// The implementation every account clones (AgentAccountFactory): locked, it can never be initialized itself.
    constructor() EIP712("AgentAccount", "1") {
        owner = address(1);
    }

    /// Called once by the factory in the transaction that creates the clone, so nobody can initialize it first.
    function initialize(address owner_, address lane_) external {
        if (owner != address(0)) revert AlreadyInitialized();
        if (owner_ == address(0) || owner_ == address(this)) revert InvalidAddress(owner_);
        if (lane_ == address(this)) revert InvalidAddress(lane_);
        owner = owner_;
        lane = lane_;
        // Default deny: no asset is allowed until the owner sets a policy.
        emit OwnerChanged(address(0), owner_);
        emit LaneRotated(address(0), lane_);
    }

    receive() external payable {}

    modifier onlyLane() {
        _requireLane();
        _;
    }

    /// The lane key calling, or `relayLane`'s self-call on its signature; not while paused.
    function _requireLane() private view {
        if (msg.sender != lane && !(msg.sender == address(this) && _laneRelayed)) revert NotLane(msg.sender);
        _requireNotPaused();
    }

    // ------------------------------------------------------------------ owner actions

    /// `paid`: addresses to count as paid before (the owner's word for payments the account did not make); signed, but
    /// not part of `policyHash`, since it only adds to history.
    function setPolicy(
        Limits calldata newLimits,
        AssetRule[] calldata assets,
        address[] calldata protocols,
        bytes32[] calldata markets,
        address[] calldata payees,
        address[] calldata paid,
        OwnerAuth calldata auth
    ) external {
        bytes memory members = _policyMembers(newLimits, assets, protocols, markets, payees);
        _authorizeOwner(keccak256(abi.encodePacked(SET_POLICY_TYPEHASH, members, keccak256(abi.encodePacked(paid)), auth.nonce, auth.deadline)), auth);
        bytes32 hash = keccak256(members);
        if (newLimits.period == 0 || newLimits.period > 3 || newLimits.maxSlippageBps > 10_000) revert InvalidLimits();
        uint64 version = ++policyVersion;
        policyHash = hash;
        _limits = newLimits;
        for (uint256 i = 0; i < assets.length; i++) {
            AssetRule calldata rule = assets[i];
            if (rule.feed == address(0)) revert AssetNotAllowed(rule.token);
            uint8 tokenDecimals = rule.token == address(0) ? 18 : IERC20Metadata(rule.token).decimals();
            _assets[rule.token] = AssetConfig(rule.feed, rule.maxPriceAge, tokenDecimals, AggregatorV3Interface(rule.feed).decimals(), version);
        }
        for (uint256 i = 0; i < protocols.length; i++) _protocols[protocols[i]] = version;
        for (uint256 i = 0; i < markets.length; i++) _markets[markets[i]] = version;
        for (uint256 i = 0; i < payees.length; i++) _payees[payees[i]] = version;
        for (uint256 i = 0; i < paid.length; i++) paidBefore[paid[i]] = true;
        emit PolicySet(version, hash);
    }

    /// A trusted destination the lane may pay from `unlockAt` on (the time lock); re-adding sets a new unlock time.
    function addTrustedDestination(address destination, uint64 unlockAt, OwnerAuth calldata auth) external {
        _authorizeOwner(keccak256(abi.encode(ADD_TRUSTED_DESTINATION_TYPEHASH, destination, unlockAt, auth.nonce, auth.deadline)), auth);
        if (destination == address(0) || unlockAt == 0) revert InvalidAddress(destination);
        trustedUnlockAt[destination] = unlockAt;
        emit TrustedDestinationAdded(destination, unlockAt);
    }

    function removeTrustedDestination(address destination, OwnerAuth calldata auth) external {
        _authorizeOwner(keccak256(abi.encode(REMOVE_TRUSTED_DESTINATION_TYPEHASH, destination, auth.nonce, auth.deadline)), auth);
        delete trustedUnlockAt[destination];
        emit TrustedDestinationRemoved(destination);
    }

    /// Cancels a pending cheque before it unlocks; its funds never left the account.
    function cancelCheque(bytes32 id, OwnerAuth calldata auth) external {
        _authorizeOwner(keccak256(abi.encode(CANCEL_CHEQUE_TYPEHASH, id, auth.nonce, auth.deadline)), auth);
        Cheque storage c = _cheques[id];
        if (c.status != 1) revert ChequeNotPending(id);
        if (block.timestamp >= c.unlockAt) revert ChequeUnlocked(c.unlockAt);
        c.status = 3;
        emit ChequeCancelled(id);
    }

    function pause(OwnerAuth calldata auth) external {
        _authorizeOwner(keccak256(abi.encode(PAUSE_TYPEHASH, auth.nonce, auth.deadline)), auth);
        _pause();
    }

    function resume(OwnerAuth calldata auth) external {
        _authorizeOwner(keccak256(abi.encode(RESUME_TYPEHASH, auth.nonce, auth.deadline)), auth);
        _unpause();
    }

    /// Replaces the lane key (address(0) disables the lane): the previous key's calls revert from now on.
    function rotateLane(address newLane, OwnerAuth calldata auth) external {
        _authorizeOwner(keccak256(abi.encode(ROTATE_LANE_TYPEHASH, newLane, auth.nonce, auth.deadline)), auth);
        if (newLane == address(this)) revert InvalidAddress(newLane);
        emit LaneRotated(lane, newLane);
        lane = newLane;
    }

    /**
     * The owner's approval of one transfer above the approval threshold, or to a new payee (issue 27): the next `pay`,
     * `issueCheque` or `authorizeX402` of exactly `amount` of `token` to `to` that needs one consumes it. `operationId`
     * names the API operation.
     */
    function approveSpend(bytes32 operationId, address token, address to, uint256 amount, OwnerAuth calldata auth) external {
        _authorizeOwner(keccak256(abi.encode(APPROVE_SPEND_TYPEHASH, operationId, token, to, amount, auth.nonce, auth.deadline)), auth);
        spendApprovals[keccak256(abi.encode(token, to, amount))] += 1;
        emit SpendApproved(operationId, token, to, amount);
    }

    function transferOwnership(address newOwner, OwnerAuth calldata auth) external {
        _authorizeOwner(keccak256(abi.encode(TRANSFER_OWNERSHIP_TYPEHASH, newOwner, auth.nonce, auth.deadline)), auth);
        if (newOwner == address(0) || newOwner == address(this)) revert InvalidAddress(newOwner);
        emit OwnerChanged(owner, newOwner);
        owner = newOwner;
    }

    /// The owner's own transaction, unrestricted (rescue, positions the lane cannot unwind): the owner calling only.
    function ownerExecute(address target, uint256 value, bytes calldata data) external returns (bytes memory) {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        return Address.functionCallWithValue(target, data, value);
    }

    // ------------------------------------------------------------------ the lane

    /// A lane call submitted by anyone (the relayer, which pays the gas) with the lane key's EIP-712 signature.
    function relayLane(bytes calldata data, bytes32 nonce, uint256 deadline, bytes calldata signature) external returns (bytes memory) {
        if (block.timestamp > deadline) revert SignatureExpired(deadline);
        if (laneNonceUsed[nonce]) revert LaneNonceUsed(nonce);
        bytes32 digest = _hashTypedDataV4(keccak256(abi.encode(LANE_CALL_TYPEHASH, keccak256(data), nonce, deadline)));
        if (lane == address(0) || !SignatureChecker.isValidSignatureNow(lane, digest, signature)) revert InvalidLaneSignature();
        laneNonceUsed[nonce] = true;
        _laneRelayed = true;
        bytes memory result = Address.functionCall(address(this), data);
        _laneRelayed = false;
        return result;
    }

    /// Several lane calls in one relayed call, in order, all or nothing (issue 30: wrap then swap, wrap then supply
    /// collateral). Each is this account's own lane function, checked and counted as if called alone; inside
    /// `relayLane` only (a direct call's self-calls are not the lane).
    function batch(bytes[] calldata calls) external onlyLane {
        for (uint256 i; i < calls.length; ++i) Address.functionCall(address(this), calls[i]);
    }

    /// Pays `amount` of `token` (address(0): the native coin) to a payee or a trusted destination whose time lock passed.
    function pay(address token, address to, uint256 amount) external onlyLane nonReentrant {
        _requireRecipient(to);
        _countTransfer(this.pay.selector, token, to, amount);
        _send(token, to, amount);
    }

    /// Confirms a trusted destination (the owner's add, once its time lock passed); reverts before `unlockAt`.
    function confirmTrustedDestination(address destination) external onlyLane {
        uint64 unlockAt = trustedUnlockAt[destination];
        if (unlockAt == 0) revert NotTrusted(destination);
        if (block.timestamp < unlockAt) revert TimeLockNotReached(unlockAt);
        emit TrustedDestinationConfirmed(destination);
    }

    /// A one-off payment to any address, counted toward the caps now, claimable from `unlockAt` until `expiresAt`.
    function issueCheque(bytes32 id, address token, address to, uint256 amount, uint64 unlockAt, uint64 expiresAt) external onlyLane nonReentrant {
        if (_cheques[id].status != 0) revert ChequeExists(id);
        if (to == address(0) || amount == 0 || expiresAt <= unlockAt || unlockAt < block.timestamp + _limits.minChequeDelay) revert BadCheque();
        _countTransfer(this.issueCheque.selector, token, to, amount);
        _cheques[id] = Cheque(token, to, amount, unlockAt, expiresAt, 1);
        emit ChequeIssued(id, token, to, amount, unlockAt, expiresAt);
    }

    /// Pays a pending cheque to its recipient: anyone may submit it, from its unlock until its expiry.
    function claimCheque(bytes32 id) external whenNotPaused nonReentrant {
        Cheque storage c = _cheques[id];
        if (c.status != 1) revert ChequeNotPending(id);
        if (block.timestamp < c.unlockAt) revert ChequeLocked(c.unlockAt);
        if (block.timestamp >= c.expiresAt) revert ChequeExpired(c.expiresAt);
        c.status = 2;
        emit ChequeClaimed(id);
        _send(c.token, c.to, c.amount);
    }

    /**
     * Vouches (ERC-1271) for one EIP-3009 transferWithAuthorization from this account, counted toward the caps now;
     * the token's own nonce makes it single-use. Returns the digest the token will ask `isValidSignature` about.
     */
    function authorizeX402(address token, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce) external onlyLane nonReentrant returns (bytes32 digest) {
        _requireRecipient(to);
        _countTransfer(this.authorizeX402.selector, token, to, value);
        digest = MessageHashUtils.toTypedDataHash(
            IERC20Permit(token).DOMAIN_SEPARATOR(),
            keccak256(abi.encode(TRANSFER_WITH_AUTHORIZATION_TYPEHASH, address(this), to, value, validAfter, validBefore, nonce))
        );
        x402Authorized[digest] = validBefore;
        emit X402Authorized(digest, token, to, value, nonce);
    }

    /// ERC-1271: valid only for a digest the lane authorized through `authorizeX402`, before its validBefore, unpaused.
    function isValidSignature(bytes32 hash, bytes calldata) external view returns (bytes4) {
        uint256 validBefore = x402Authorized[hash];
        return validBefore != 0 && block.timestamp < validBefore && !paused() ? IERC1271.isValidSignature.selector : bytes4(0xffffffff);
    }

    /// Swaps along an allowed router to this account; the output must reach the oracle value of the input less the slippage cap.
    function swap(address router, address[] calldata pairs, address[] calldata path, uint256 amountIn, uint256 minAmountOut) external onlyLane nonReentrant returns (uint256 amountOut) {
        _requireProtocol(router);
        if (path.length < 2) revert BadRoute();
        IERC20 tokenIn = IERC20(path[0]);
        IERC20 tokenOut = IERC20(path[path.length - 1]);
        uint256 usd = _count(this.swap.selector, address(tokenIn), router, amountIn);
        uint256 floor = (_unitsForUsd(address(tokenOut), usd) * (10_000 - _limits.maxSlippageBps)) / 10_000;
        if (minAmountOut < floor) minAmountOut = floor;
        uint256 before = tokenOut.balanceOf(address(this));
        tokenIn.forceApprove(router, amountIn);
        ISwapRouterLike(router).swapExactIn(pairs, path, amountIn, minAmountOut, address(this), block.timestamp);
        tokenIn.forceApprove(router, 0);
        amountOut = tokenOut.balanceOf(address(this)) - before;
        if (amountOut < minAmountOut) revert InsufficientOutput(amountOut, minAmountOut);
        (_swapOutToken, _swapOut) = (address(tokenOut), amountOut);
    }

    /// Wraps `amount` of this account's ETH into an allowed WETH (a protocol of the policy), or unwraps it back. The
    /// value stays in this account (checked: the WETH balance grows by `amount`, or the ETH balance does), so it is
    /// not counted toward the caps. Unwrapping 0 unwraps what the swap just before (in this transaction) paid in
    /// `weth`, so `batch([swap, wrapEth(weth, 0, true)])` turns exactly the swap's output into ETH.
    function wrapEth(address weth, uint256 amount, bool unwrap) external onlyLane nonReentrant {
        _requireProtocol(weth);
        if (unwrap && amount == 0) {
            if (_swapOutToken != weth) revert BadRoute();
            (amount, _swapOut) = (_swapOut, 0);
        }
        uint256 before = unwrap ? address(this).balance : IERC20(weth).balanceOf(address(this));
        if (unwrap) IWETH(weth).withdraw(amount);
        else IWETH(weth).deposit{value: amount}();
        uint256 got = (unwrap ? address(this).balance : IERC20(weth).balanceOf(address(this))) - before;
        if (got != amount) revert InsufficientOutput(got, amount);
    }

    /// Deposits into an allowed ERC-4626 vault; the shares go to this account.
    function deposit(address vault, uint256 assets, uint256 minShares) external onlyLane nonReentrant returns (uint256) {
        return _deposit(this.deposit.selector, vault, assets, minShares);
    }

    /// Redeems shares of an allowed vault into another allowed vault of the same asset, in one call: the assets pass
    /// through this account only, the new shares come to it. Counted once, as a deposit of the assets redeemed.
    function move(address fromVault, address toVault, uint256 shares, uint256 minShares) external onlyLane nonReentrant returns (uint256) {
        _requireProtocol(fromVault);
        return _deposit(this.move.selector, toVault, IERC4626(fromVault).redeem(shares, address(this), address(this)), minShares);
    }

    /// Redeems shares of an allowed vault; the assets come to this account.
    function redeem(address vault, uint256 shares, uint256 minAssets) external onlyLane nonReentrant returns (uint256 assets) {
        _requireProtocol(vault);
        assets = IERC4626(vault).redeem(shares, address(this), address(this));
        if (assets < minAssets) revert InsufficientOutput(assets, minAssets);
        _count(this.redeem.selector, IERC4626(vault).asset(), vault, assets);
    }

    function supplyCollateral(address morpho, MorphoMarket calldata market, uint256 assets) external onlyLane nonReentrant {
        _requireMarket(morpho, market);
        _count(this.supplyCollateral.selector, market.collateralToken, morpho, assets);
        IERC20(market.collateralToken).forceApprove(morpho, assets);
        IMorphoBlue(morpho).supplyCollateral(market, assets, address(this), "");
    }

    /// Withdraws collateral to this account; the position's LTV must stay within the cap.
    function withdrawCollateral(address morpho, MorphoMarket calldata market, uint256 assets) external onlyLane nonReentrant {
        bytes32 id = _requireMarket(morpho, market);
        _count(this.withdrawCollateral.selector, market.collateralToken, morpho, assets);
        IMorphoBlue(morpho).withdrawCollateral(market, assets, address(this), address(this));
        _requireLtv(morpho, market, id);
    }

    /// Borrows to this account; the position's LTV must stay within the cap.
    function borrow(address morpho, MorphoMarket calldata market, uint256 assets) external onlyLane nonReentrant {
        bytes32 id = _requireMarket(morpho, market);
        _count(this.borrow.selector, market.loanToken, morpho, assets);
        IMorphoBlue(morpho).borrow(market, assets, 0, address(this), address(this));
        _requireLtv(morpho, market, id);
    }

    /// Repays `assets`, or `shares` when `assets` is 0, paying at most `maxAssets`; counted at what was repaid.
    function repay(address morpho, MorphoMarket calldata market, uint256 assets, uint256 shares, uint256 maxAssets) external onlyLane nonReentrant returns (uint256 repaid) {
        _requireMarket(morpho, market);
        IERC20(market.loanToken).forceApprove(morpho, maxAssets);
        (repaid, ) = IMorphoBlue(morpho).repay(market, assets, shares, address(this), "");
        IERC20(market.loanToken).forceApprove(morpho, 0);
        if (repaid > maxAssets) revert InsufficientOutput(maxAssets, repaid);
        _count(this.repay.selector, market.loanToken, morpho, repaid);
    }

    // ------------------------------------------------------------------ views

    function limits() external view returns (Limits memory) {
        return _limits;
    }

    /**
     * What `policyHash` holds for a policy: keccak256 of the concatenated EIP-712 encodings of SetPolicy's first five
     * members (hashStruct(limits), the hash of the AssetRule[] array, of protocols, of markets, of payees), i.e. the
     * signed struct hash's preimage without the typehash, nonce and deadline.
     */
    function policyHashOf(Limits calldata newLimits, AssetRule[] calldata assets, address[] calldata protocols, bytes32[] calldata markets, address[] calldata payees) external pure returns (bytes32) {
        return keccak256(_policyMembers(newLimits, assets, protocols, markets, payees));
    }

    /// Usage in the current period (zeros once the period rolled over).
    function usage() public view returns (Usage memory u) {
        u = _usage;
        uint64 start = periodStart(_limits.period, block.timestamp);
        if (u.periodStart != start) (u.periodStart, u.periodUsd, u.periodTxs, u.periodSwaps) = (start, 0, 0, 0);
    }

    function allowance() external view returns (Allowance memory a) {
        Limits memory l = _limits;
        Usage memory u = usage();
        a.perTxUsd = l.perTxUsd;
        a.periodRemainingUsd = l.perPeriodUsd > u.periodUsd ? l.perPeriodUsd - u.periodUsd : 0;
        a.lifetimeRemainingUsd = l.lifetimeUsd > u.lifetimeUsd ? l.lifetimeUsd - u.lifetimeUsd : 0;
        a.txsRemaining = l.maxTxsPerPeriod > u.periodTxs ? l.maxTxsPerPeriod - u.periodTxs : 0;
        a.nextTxBlock = l.cooldownBlocks != 0 && u.lastTxBlock != 0 ? u.lastTxBlock + l.cooldownBlocks : 0;
        a.exposureUsd = paused() || a.txsRemaining == 0 || policyVersion == 0 ? 0 : Math.min(a.periodRemainingUsd, a.lifetimeRemainingUsd);
    }

    function isAllowedAsset(address token) public view returns (bool) {
        return policyVersion != 0 && _assets[token].version == policyVersion;
    }

    function isAllowedProtocol(address target) public view returns (bool) {
        return policyVersion != 0 && _protocols[target] == policyVersion;
    }

    function isAllowedMarket(bytes32 marketId) public view returns (bool) {
        return policyVersion != 0 && _markets[marketId] == policyVersion;
    }

    function isPayee(address account) public view returns (bool) {
        return policyVersion != 0 && _payees[account] == policyVersion;
    }

    function cheque(bytes32 id) external view returns (Cheque memory) {
        return _cheques[id];
    }

    /// The USD value (8 decimals, rounded up) the caps count for `amount` of an allowed `token`.
    function usdValue(address token, uint256 amount) public view returns (uint256) {
        (uint256 price, AssetConfig memory cfg) = _price(token);
        return Math.mulDiv(amount, price * 1e8, 10 ** (uint256(cfg.tokenDecimals) + cfg.feedDecimals), Math.Rounding.Ceil);
    }

    /// The start (unix seconds, UTC) of the period containing `timestamp`: 1 day, 2 week from Monday, 3 calendar month.
    function periodStart(uint8 period, uint256 timestamp) public pure returns (uint64) {
        uint256 day = timestamp / 1 days;
        if (period == 2) return uint64((day - ((day + 3) % 7)) * 1 days); // 1970-01-01 was a Thursday
        if (period == 3) {
            // Day of the month from the day number (H. Hinnant's civil_from_days).
            uint256 z = day + 719468;
            uint256 doe = z % 146097;
            uint256 yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
            uint256 doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
            uint256 mp = (5 * doy + 2) / 153;
            return uint64((day - (doy - (153 * mp + 2) / 5)) * 1 days);
        }
        return uint64(day * 1 days);
    }

    // ------------------------------------------------------------------ internals

    /// The owner calling, or the owner's EIP-712 signature over `structHash` (its keyed nonce used once, before its deadline).
    function _authorizeOwner(bytes32 structHash, OwnerAuth calldata auth) private {
        if (msg.sender == owner) return;
        if (block.timestamp > auth.deadline) revert SignatureExpired(auth.deadline);
        if (!SignatureChecker.isValidSignatureNow(owner, _hashTypedDataV4(structHash), auth.signature)) revert InvalidOwnerSignature();
        _useCheckedNonce(owner, auth.nonce);
    }

    function _policyMembers(Limits calldata newLimits, AssetRule[] calldata assets, address[] calldata protocols, bytes32[] calldata markets, address[] calldata payees) private pure returns (bytes memory) {
        return abi.encode(keccak256(abi.encode(LIMITS_TYPEHASH, newLimits)), _hashAssetRules(assets), keccak256(abi.encodePacked(protocols)), keccak256(abi.encodePacked(markets)), keccak256(abi.encodePacked(payees)));
    }

    function _hashAssetRules(AssetRule[] calldata rules) private pure returns (bytes32) {
        bytes32[] memory hashes = new bytes32[](rules.length);
        for (uint256 i = 0; i < rules.length; i++) hashes[i] = keccak256(abi.encode(ASSET_RULE_TYPEHASH, rules[i]));
        return keccak256(abi.encodePacked(hashes));
    }

    function _requireRecipient(address to) private view {
        if (_limits.anyRecipient && policyVersion != 0 && to != address(0)) return;
        if (isPayee(to)) return;
        uint64 unlockAt = trustedUnlockAt[to];
        if (unlockAt == 0) revert RecipientNotAllowed(to);
        if (block.timestamp < unlockAt) revert TimeLockNotReached(unlockAt);
    }

    function _requireProtocol(address target) private view {
        if (!isAllowedProtocol(target)) revert ProtocolNotAllowed(target);
    }

    function _requireMarket(address morpho, MorphoMarket calldata market) private view returns (bytes32 id) {
        _requireProtocol(morpho);
        id = keccak256(abi.encode(market));
        if (!isAllowedMarket(id)) revert MarketNotAllowed(id);
    }

    /// Debt (Morpho's shares rounded up to assets) over collateral valued by the market's oracle, within maxLtvBps.
    function _requireLtv(address morpho, MorphoMarket calldata market, bytes32 id) private view {
        (, uint128 borrowShares, uint128 collateral) = IMorphoBlue(morpho).position(id, address(this));
        if (borrowShares == 0) return;
        (, , uint128 totalBorrowAssets, uint128 totalBorrowShares, , ) = IMorphoBlue(morpho).market(id);
        uint256 debt = Math.mulDiv(borrowShares, uint256(totalBorrowAssets) + 1, uint256(totalBorrowShares) + 1e6, Math.Rounding.Ceil);
        uint256 value = Math.mulDiv(collateral, IMorphoOracle(market.oracle).price(), 1e36);
        uint256 ltvBps = value == 0 ? type(uint256).max : Math.mulDiv(debt, 10_000, value, Math.Rounding.Ceil);
        if (ltvBps > _limits.maxLtvBps) revert LtvExceeded(ltvBps, _limits.maxLtvBps);
    }

    function _price(address token) private view returns (uint256 price, AssetConfig memory cfg) {
        cfg = _assets[token];
        if (policyVersion == 0 || cfg.version != policyVersion) revert AssetNotAllowed(token);
        (, int256 answer, , uint256 updatedAt, ) = AggregatorV3Interface(cfg.feed).latestRoundData();
        if (cfg.maxPriceAge != 0 && updatedAt + cfg.maxPriceAge < block.timestamp) revert StalePrice(token, updatedAt);
        if (answer <= 0) {
            if (_limits.failOnZeroPrice) revert ZeroPrice(token);
            return (0, cfg);
        }
        price = uint256(answer);
    }

    /// Base units of `token` worth `usd`, rounded down (0 when the price is 0 and zero prices are let through).
    function _unitsForUsd(address token, uint256 usd) private view returns (uint256) {
        (uint256 price, AssetConfig memory cfg) = _price(token);
        if (price == 0) return 0;
        return Math.mulDiv(usd, 10 ** (uint256(cfg.tokenDecimals) + cfg.feedDecimals), price * 1e8);
    }

    /// Counts one lane transaction of `amount` of `token` toward every cap, or reverts naming the cap it would break.
    function _count(bytes4 action, address token, address counterparty, uint256 amount) private returns (uint256 usd) {
        usd = usdValue(token, amount);
        Limits memory l = _limits;
        Usage memory u = usage();
        if (l.cooldownBlocks != 0 && u.lastTxBlock != 0 && block.number < uint256(u.lastTxBlock) + l.cooldownBlocks) revert CooldownActive(u.lastTxBlock + l.cooldownBlocks);
        if (u.periodTxs >= l.maxTxsPerPeriod) revert TooManyTransactions(l.maxTxsPerPeriod);
        if (usd > l.perTxUsd) revert PerTxCapExceeded(usd, l.perTxUsd);
        // A lowered cap can sit below what was already used: nothing remains then.
        uint256 remaining = l.perPeriodUsd > u.periodUsd ? l.perPeriodUsd - u.periodUsd : 0;
        if (usd > remaining) revert PeriodCapExceeded(usd, remaining);
        remaining = l.lifetimeUsd > u.lifetimeUsd ? l.lifetimeUsd - u.lifetimeUsd : 0;
        if (usd > remaining) revert LifetimeCapExceeded(usd, remaining);
        if (action == this.swap.selector) {
            if (u.periodSwaps >= l.maxSwapsPerPeriod) revert TooManySwaps(l.maxSwapsPerPeriod);
            u.periodSwaps += 1;
        }
        u.periodTxs += 1;
        u.periodUsd += usd;
        u.lifetimeUsd += usd;
        u.lastTxBlock = uint64(block.number);
        _usage = u;
        emit Spent(action, token, counterparty, amount, usd);
    }

    /**
     * `_count` of a transfer to `to`, which is paid before from then on. Above the approval threshold, or to a new payee
     * under `approveNewPayees` (not a matured trusted destination), it consumes one owner approval of exactly it.
     */
    function _countTransfer(bytes4 action, address token, address to, uint256 amount) private {
        uint256 usd = _count(action, token, to, amount);
        uint64 unlockAt = trustedUnlockAt[to];
        bool newPayee = _limits.approveNewPayees && !paidBefore[to] && (unlockAt == 0 || block.timestamp < unlockAt);
        paidBefore[to] = true;
        if (usd <= _limits.approvalThresholdUsd && !newPayee) return;
        bytes32 key = keccak256(abi.encode(token, to, amount));
        if (spendApprovals[key] == 0) revert ApprovalRequired(usd, _limits.approvalThresholdUsd);
        spendApprovals[key] -= 1;
    }

    function _deposit(bytes4 action, address vault, uint256 assets, uint256 minShares) private returns (uint256 shares) {
        _requireProtocol(vault);
        IERC20 asset = IERC20(IERC4626(vault).asset());
        _count(action, address(asset), vault, assets);
        asset.forceApprove(vault, assets);
        shares = IERC4626(vault).deposit(assets, address(this));
        asset.forceApprove(vault, 0);
        if (shares < minShares) revert InsufficientOutput(shares, minShares);
    }

    function _send(address token, address to, uint256 amount) private {
        if (token == address(0)) Address.sendValue(payable(to), amount);
        else IERC20(token).safeTransfer(to, amount);
    }
}
