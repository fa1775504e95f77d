// Sign in with a passkey, or with an e-mailed one-time code (the fallback and the first sign-in).
import { startAuthentication, type PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/browser';
import { useState } from 'preact/hooks';
import { consoleAuth, setCsrfToken, type ConsoleSession } from '../api.js';
import { ActionForm, Field, useTitle } from '../ui.js';

export function SignIn(props: { onSignedIn: () => void }) {
  const [email, setEmail] = useState('');
  const [code, setCode] = useState('');
  const [sent, setSent] = useState(false);
  useTitle('Sign in');
  return (
    <main class="signin">
      <h1>Agent API console</h1>
      {!sent ? (
        <ActionForm
          label="Send me a code"
          name="Sign in"
          action={async () => {
            await consoleAuth('POST', 'code', { email });
            setSent(true);
          }}
        >
          <Field label="E-mail address" name="email" type="email" value={email} onInput={setEmail} required autoComplete="email" />
        </ActionForm>
      ) : (
        <ActionForm
          label="Sign in"
          name="Enter the code"
          action={async () => {
            const res = await consoleAuth<ConsoleSession>('POST', 'verify', { code });
            setCsrfToken(res.csrf_token);
            props.onSignedIn();
          }}
        >
          <p>We sent a 6-digit code to {email}.</p>
          <Field label="One-time code" name="code" value={code} onInput={setCode} required placeholder="123456" focus autoComplete="one-time-code" inputMode="numeric" />
        </ActionForm>
      )}
      {/* After the e-mail form: the code is the first sign-in and the fallback; a registered passkey is one click. */}
      {!sent && (
        <ActionForm
          label="Sign in with a passkey"
          name="Sign in with a passkey"
          action={async () => {
            const { options } = await consoleAuth<{ options: PublicKeyCredentialRequestOptionsJSON }>('POST', 'passkey/options', {});
            const response = await startAuthentication({ optionsJSON: options });
            const res = await consoleAuth<ConsoleSession>('POST', 'passkey/verify', { response });
            setCsrfToken(res.csrf_token);
            props.onSignedIn();
          }}
        />
      )}
    </main>
  );
}
