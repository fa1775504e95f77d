// The owner's passkeys (issue 27): register one (WebAuthn through @simplewebauthn/browser); they sign in and approve.
import { startRegistration, type PublicKeyCredentialCreationOptionsJSON } from '@simplewebauthn/browser';
import { useState } from 'preact/hooks';
import { api, idempotency, ok, type Schemas } from '../api.js';
import { ActionForm, Field, Status, Table, useLoad, useTitle, when } from '../ui.js';

export function Passkeys() {
  useTitle('Passkeys');
  const list = useLoad(() => ok(api.GET('/v1/owner/passkeys')), []);
  const [name, setName] = useState('');
  return (
    <>
      <h1>Passkeys</h1>
      <p>A passkey signs you in without an e-mailed code and approves what your agents ask for. The e-mailed code stays available.</p>
      <Status text={list.error} kind="error" />
      <Table caption="Your passkeys" head={['Name', 'Added', 'Last used']} rows={(list.data?.items ?? []).map((p) => [p.name, when(p.created_at), when(p.last_used_at)])} empty="No passkey yet." />
      <ActionForm
        label="Add a passkey"
        name="Add a passkey"
        action={async () => {
          const { options } = await ok(api.POST('/v1/owner/passkeys/registration-options', { params: { header: idempotency() } }));
          const response = await startRegistration({ optionsJSON: options as unknown as PublicKeyCredentialCreationOptionsJSON });
          await ok(api.POST('/v1/owner/passkeys', { params: { header: idempotency() }, body: { name: name || 'Passkey', response: response as unknown as Schemas['WebAuthnCredentialJson'] } }));
          setName('');
          list.reload();
          return 'Passkey added.';
        }}
      >
        <Field label="Name (optional)" name="passkey-name" value={name} onInput={setName} placeholder="Laptop" />
      </ActionForm>
    </>
  );
}
