import { provideHttpClient, withFetch } from '@angular/common/http'
import { bootstrapApplication } from '@angular/platform-browser'
import { Categories } from './app/categories'

void bootstrapApplication(Categories, { providers: [provideHttpClient(withFetch())] })
